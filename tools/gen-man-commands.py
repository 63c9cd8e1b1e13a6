#!/usr/bin/env python3
"""Regenerates the COMMANDS section of man/multidecode.1 from each command's --help.

    python3 tools/gen-man-commands.py [--check] [BINARY]

The section runs from the line ".SH COMMANDS" to the next ".SH". --help is the source of
truth: a usage line becomes the command's synopsis, prose lines a paragraph, and each
option line ("  -m, --model PATH     GGUF model file", with indented continuation lines)
a tagged paragraph. With --check nothing is written: the exit status says whether the page
is up to date (tests/test_man.sh runs it)."""
import re
import subprocess
import sys

COMMANDS = ["generate", "ask", "cot", "beam", "judge", "tot", "margins", "plan", "tour", "session", "info",
            "bench decode", "bench forest", "bench ask", "bench attention", "bench beam", "bench cot",
            "convert-llama2c", "mkmodel", "tui"]
PAGE = "man/multidecode.1"
# an option ("  -m, --model PATH     text") or a sub-command ("  info     text")
OPTION = re.compile(r"^ {0,6}(-\S.*?|[a-z][a-z-]*(?= {2,}))(?: {2,}(\S.*))?$")


def esc(s):
    s = s.replace("\\", "\\\\").replace("-", "\\-").replace("'", "\\(aq")
    return "\\&" + s if s[:1] in (".", "'") else s


def commands(binary):
    """COMMANDS, then every other command the program's --help lists (the strategies found by
    name in the registry, which need no line here), in that list's order."""
    text = subprocess.run([binary, "--help"], capture_output=True, text=True).stdout
    listed = re.findall(r"^  ([a-z][a-z0-9-]*)  ", text.split("commands:", 1)[-1], re.M)
    return COMMANDS + [c for c in listed if c not in COMMANDS and c != "bench"]


def section(binary):
    out = [".SH COMMANDS", "Each command prints its options with", ".BR \\-\\-help ;",
           "this list is taken from that output."]
    for cmd in commands(binary):
        text = subprocess.run([binary] + cmd.split() + ["--help"], capture_output=True,
                              text=True).stdout
        out.append('.SS "%s"' % cmd)
        prose = False
        for line in text.splitlines():
            if not line.strip():
                prose = False
                continue
            if line.startswith("usage: ") or line.startswith("       multidecode"):
                if out[-1].startswith(".B ") and not out[-1].startswith(".B \"\\-"):
                    out.append(".br")
                out.append('.B "%s"' % esc(line.split(": ", 1)[1] if line.startswith("usage: ")
                                           else line.strip()).replace('"', '\\(dq'))
                continue
            m = OPTION.match(line)
            if m and not line.startswith(" " * 8):
                out += [".TP", '.B "%s"' % esc(m.group(1).strip())]
                if m.group(2):
                    out.append(esc(m.group(2)))
                prose = False
                continue
            if line.startswith(" " * 8) and out[-1] and not out[-1].startswith("."):
                out[-1] += " " + esc(line.strip())  # an option's continuation
                continue
            if not prose:
                out.append(".PP")
                prose = True
            out.append(esc(line.strip()))
    return out


def main():
    args = [a for a in sys.argv[1:] if a != "--check"]
    binary = args[0] if args else "./multidecode"
    lines = open(PAGE, encoding="utf-8").read().split("\n")
    start = lines.index(".SH COMMANDS")
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith(".SH "))
    new = lines[:start] + section(binary) + lines[end:]
    if "--check" in sys.argv:
        if new != lines:
            print("man/multidecode.1: the COMMANDS section differs from --help; run "
                  "python3 tools/gen-man-commands.py", file=sys.stderr)
            return 1
        return 0
    open(PAGE, "w", encoding="utf-8").write("\n".join(new))
    return 0


if __name__ == "__main__":
    sys.exit(main())
