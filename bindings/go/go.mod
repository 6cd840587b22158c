module github.com/fencelock/fencelock/bindings/go

go 1.19
