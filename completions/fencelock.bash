# bash completion for fencelock(1): subcommands, their options, and files or
# commands where an argument is a path or a command line.
# Installed as share/bash-completion/completions/fencelock; plain bash, it
# needs nothing from the bash-completion package.

_fencelock()
{
    local cur=${COMP_WORDS[COMP_CWORD]}
    local prev=
    [ "$COMP_CWORD" -gt 0 ] && prev=${COMP_WORDS[COMP_CWORD-1]}
    local commands="status metrics run commit read etcd-epoch help"
    COMPREPLY=()

    if [ "$COMP_CWORD" -eq 1 ]; then
        if [[ $cur == -* ]]; then
            mapfile -t COMPREPLY < <(compgen -W "-h --help -V --version" -- "$cur")
        else
            mapfile -t COMPREPLY < <(compgen -W "$commands" -- "$cur")
        fi
        return 0
    fi

    local cmd=${COMP_WORDS[1]} opts= argopts=
    case $cmd in
    status)
        opts="-r --region --json --prefix --watch --count -o --output --output-all --list-columns -h --help"
        argopts="-r --region --prefix --count -o --output" ;;
    metrics)
        opts="-r --region -h --help"
        argopts="-r --region" ;;
    run)
        opts="-r --region -l --lease -w --wait -n --no-wait -k --kill-after -E --conflict-exit-code -c --command --require-supervisor -h --help"
        argopts="-r --region -l --lease -w --wait -k --kill-after -E --conflict-exit-code -c --command"
        # After --: COMMAND, then its arguments (files).
        local i
        for ((i = 2; i < COMP_CWORD; i++)); do
            if [ "${COMP_WORDS[i]}" = "--" ]; then
                if [ $((i + 1)) -eq "$COMP_CWORD" ]; then
                    mapfile -t COMPREPLY < <(compgen -c -- "$cur")
                else
                    compopt -o default 2>/dev/null
                fi
                return 0
            fi
        done ;;
    commit)
        opts="--region --strict --key --token -h --help"
        argopts="--region --key --token" ;;
    read)
        opts="--region --json -h --help"
        argopts="--region" ;;
    etcd-epoch)
        opts="-r --region -b --bump -a --at-least -h --help"
        argopts="-r --region -a --at-least" ;;
    help)
        [ "$COMP_CWORD" -eq 2 ] && mapfile -t COMPREPLY < <(compgen -W "$commands" -- "$cur")
        return 0 ;;
    *)
        return 0 ;;
    esac

    # The argument of an option: a path for --region, nothing to offer else.
    local o
    for o in $argopts; do
        if [ "$prev" = "$o" ]; then
            case $o in
            -r | --region)
                compopt -o filenames 2>/dev/null
                mapfile -t COMPREPLY < <(compgen -f -- "$cur") ;;
            esac
            return 0
        fi
    done

    if [[ $cur == -* ]]; then
        mapfile -t COMPREPLY < <(compgen -W "$opts" -- "$cur")
        return 0
    fi
    # commit RECORD FILE: the second operand is a file.
    if [ "$cmd" = commit ]; then
        local operands=0 j
        for ((j = 2; j < COMP_CWORD; j++)); do
            case ${COMP_WORDS[j]} in
            --region | --key | --token) j=$((j + 1)) ;;
            -*) ;;
            *) operands=$((operands + 1)) ;;
            esac
        done
        if [ "$operands" -ge 1 ]; then
            compopt -o filenames 2>/dev/null
            mapfile -t COMPREPLY < <(compgen -f -- "$cur")
        fi
    fi
    return 0
}
complete -F _fencelock fencelock
