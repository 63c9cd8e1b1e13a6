# ptxas.awk - reads the output of nvcc -Xptxas -v for one .cu file: prints each sm_90
# kernel's registers, stack and spills on one line, and exits 1 when any kernel of any
# architecture spills registers (its "N bytes spill stores" above 0), naming it.
/Compiling entry function/ {
    fn = $0; sub(/.*function '/, "", fn); sub(/'.*/, "", fn)
    arch = $NF; gsub(/'/, "", arch)
    cmd = "c++filt '" fn "' 2>/dev/null"; dm = ""
    if ((cmd | getline dm) <= 0) dm = fn
    close(cmd); gsub(/\(anonymous namespace\)::/, "", dm); sub(/\(.*/, "", dm)
}
/bytes spill stores/ {
    frame = $0; sub(/^[ \t]*/, "", frame)
    split($0, part, ","); stores = part[2] + 0
    if (stores > 0) { printf "%s: %s (%s) spills registers: %s\n", FILENAME, dm, arch, frame; bad = 1 }
}
/Used [0-9]+ registers/ && arch == "sm_90" {
    regs = $0; sub(/.*Used /, "", regs); sub(/,.*/, "", regs)
    printf "  sm_90 %-28s %s, %s\n", dm, regs, frame
}
END { exit bad }
