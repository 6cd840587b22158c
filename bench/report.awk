# SPDX-License-Identifier: MIT
# report.awk - turn the benchmarks' CSV into the markdown report.
#
# Input rows: kind,question,case,metric,value,unit,target,verdict
#   machine  question 0; case = what, metric = its value (text)
#   result   one figure; a question's figures are shown as tables with a row
#            per case and a column per metric, in the order they first
#            appear; consecutive cases with the same metrics share a table
#   target   case = the target, metric = what was measured, target = limit,
#            verdict = PASS or MISS
#   note     case = text shown under the question's table
# Variables: mode (quick|full), cmd (the command that made the results), only
# (non-empty when bench/run --only chose a subset).
BEGIN {
    FS = ","
    title[1] = "1. Uncontended cost"
    title[2] = "2. Contended handoff"
    title[3] = "3. Fenced commit and read"
    title[4] = "4. Pause across expiry (the headline)"
    title[5] = "5. Death of a holder"
    title[6] = "6. Scale: keys and waiters"
    title[7] = "7. A region on disk (durable records) against tmpfs"
    title[8] = "8. Language bindings against the same C calls (this run)"
    title[9] = "9. etcd backend against raw etcd requests and etcdctl lock"
}
NR == 1 && $1 == "kind" { next }
$1 == "machine" { mach[$3] = $4; machorder[++nm] = $3; next }
$1 == "result" {
    q = $2 + 0
    if (!((q, $3) in seen_case)) { seen_case[q, $3] = 1; cases[q, ++ncase[q]] = $3 }
    if (!((q, $3, $4) in cell)) { cm[q, $3, ++ncm[q, $3]] = $4 }
    cell[q, $3, $4] = fmt($5, $6)
    hasq[q] = 1
    next
}
$1 == "target" {
    nt++
    tq[nt] = $2; tname[nt] = $3; tmeas[nt] = $4; tval[nt] = fmt($5, $6); tlim[nt] = $7
    tverd[nt] = $8
    next
}
$1 == "note" { notes[$2 + 0, ++nnote[$2 + 0]] = $3; hasq[$2 + 0] = 1; next }

function fmt(v, unit,    a) {
    if (v == "nan" || v == "") return "–"
    v = v + 0
    a = v < 0 ? -v : v
    if (unit == "ns") {
        if (a < 100) return sprintf("%.1f ns", v)
        if (a < 10000) return sprintf("%.0f ns", v)
        if (a < 1e6) return sprintf("%.1f µs", v / 1e3)
        return sprintf("%.2f ms", v / 1e6)
    }
    if (unit == "us") return sprintf("%.1f µs", v)
    if (unit == "ms") return sprintf("%.2f ms", v)
    if (unit == "1/s") {
        if (a >= 1e6) return sprintf("%.2f M/s", v / 1e6)
        if (a >= 1e3) return sprintf("%.1f k/s", v / 1e3)
        return sprintf("%.0f /s", v)
    }
    if (unit == "x") return sprintf("%.2f×", v)
    if (unit == "MB") return sprintf("%.1f MB", v)
    if (unit == "B") return sprintf("%.0f B", v)
    if (unit == "ops") return sprintf("%d", v)
    if (unit == "n") return sprintf("%.2f", v)
    if (v == int(v)) return sprintf("%d", v)
    return sprintf("%.4g %s", v, unit)
}

END {
    printf "# fencelock benchmarks (%s mode)\n\n", mode
    printf "Command: `%s`", cmd
    if ("date" in mach) printf ", %s", mach["date"]
    printf ".  \nMachine: "
    sep = ""
    for (i = 1; i <= nm; i++) {
        k = machorder[i]
        if (k == "date") continue
        printf "%s%s %s", sep, k, mach[k]
        sep = "; "
    }
    printf ".\n\n"

    pass = 0
    for (i = 1; i <= nt; i++) if (tverd[i] == "PASS") pass++
    printf "## Targets: %d of %d met\n\n", pass, nt
    printf "| Q | target | measured | value | limit | verdict |\n|---|---|---|---|---|---|\n"
    for (i = 1; i <= nt; i++)
        printf "| %s | %s | %s | %s | %s | **%s** |\n", tq[i], tname[i], tmeas[i], tval[i], tlim[i], tverd[i]
    printf "\n"

    for (q = 1; q <= 9; q++) {
        if (!(q in hasq)) {
            if (q == 8 || only != "") continue  # bindings, and a subset: only when measured
            printf "## %s\n\nno results (the program failed or was not run; see its log)\n\n", title[q]
            continue
        }
        printf "## %s\n\n", title[q]
        prev = ""
        for (c = 1; c <= ncase[q]; c++) {
            cs = cases[q, c]
            sig = ""
            for (m = 1; m <= ncm[q, cs]; m++) sig = sig "|" cm[q, cs, m]
            if (sig != prev) {
                if (prev != "") printf "\n"
                printf "| case |"
                for (m = 1; m <= ncm[q, cs]; m++) printf " %s |", cm[q, cs, m]
                printf "\n|---|"
                for (m = 1; m <= ncm[q, cs]; m++) printf "---:|"
                printf "\n"
                prev = sig
            }
            printf "| %s |", cs
            for (m = 1; m <= ncm[q, cs]; m++) printf " %s |", cell[q, cs, cm[q, cs, m]]
            printf "\n"
        }
        if (ncase[q] > 0) printf "\n"
        for (n = 1; n <= nnote[q]; n++) printf "- %s\n", notes[q, n]
        printf "\n"
    }
}
