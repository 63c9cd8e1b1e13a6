/* test_cli_hostile.c - the program given hostile files and options, as a user
 * runs it: a FIFO or /dev/zero as --context, --load or `session info`'s file is refused at
 * once naming what it is (every run under `timeout`, so a blocking open fails the check
 * instead of hanging the suite, and under a memory limit, so an endless read fails
 * instead of exhausting the machine); a context file with a NUL byte is refused naming
 * the offset; numeric options out of range are refused naming the range (a seed takes all
 * 64 bits and is never clamped); `info` and `session info` print no control byte from a
 * file (metadata keys, tensor names, setting keys and values, the chat template, the
 * model's name), only escapes; a start loads no CUDA library; margins with more chunks
 * than it holds is refused without a double free; a file the program writes (--svg, a
 * model) is refused when it is a FIFO, a device or a link, and never written through a link.
 * Runs $BUILD/multidecode (BUILD defaults to "build") on stories260K; skips without it. */
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "gguf/gguf.h"
#include "kernels/dtype.h"
#include "t.h"
#include "t_run.h"

static char bin[512], model_path[4096], tmpdir[64];

/* The folder of path ("." when it has none), in a static buffer. */
static const char *dirname_of(const char *path) {
    static char d[512];
    const char *slash = strrchr(path, '/');
    snprintf(d, sizeof d, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
    return d;
}

/* Runs `$bin ARGS 2>&1` bounded in time and (except under ASan, whose shadow memory
 * needs terabytes of address space) in memory; out (caller frees) and exit status. */
static char *run_bounded(int *st, const char *args) {
    return t_runf(st, "%stimeout 20 %s %s 2>&1", strstr(bin, "asan") ? "" : "ulimit -v 4000000; ",
                  bin, args);
}

/* The command must exit with want and print needle. */
static void expect(const char *args, int want, const char *needle, const char *what) {
    int st;
    char *out = run_bounded(&st, args);
    T_CHECK(out && st == want && strstr(out, needle), "%s: want exit %d with \"%s\", got %d: %s",
            what, want, needle, st, out ? out : "(no output)");
    free(out);
}

static void test_not_regular(void) {
    char fifo[128], args[8192];
    snprintf(fifo, sizeof fifo, "%s/fifo", tmpdir);
    if (mkfifo(fifo, 0600) != 0) {
        T_SKIP("mkfifo failed");
        return;
    }
    snprintf(args, sizeof args, "ask -m %s --context %s -q Why?", model_path, fifo);
    expect(args, 1, "is a FIFO, not a regular file", "ask --context FIFO");
    snprintf(args, sizeof args, "ask -m %s --context /dev/zero -q Why?", model_path);
    expect(args, 1, "is a character device, not a regular file", "ask --context /dev/zero");
    snprintf(args, sizeof args, "margins -m %s --context %s -q Why?", model_path, fifo);
    expect(args, 1, "is a FIFO, not a regular file", "margins --context FIFO");
    snprintf(args, sizeof args, "cot -m %s --load %s", model_path, fifo);
    expect(args, 1, "is a FIFO, not a regular file", "cot --load FIFO");
    snprintf(args, sizeof args, "cot -m %s --load /dev/zero", model_path);
    expect(args, 1, "is a character device, not a regular file", "cot --load /dev/zero");
    snprintf(args, sizeof args, "session info %s", fifo);
    expect(args, 1, "is a FIFO, not a regular file", "session info FIFO");
    snprintf(args, sizeof args, "info %s", fifo);
    expect(args, 1, "is a FIFO, not a regular file", "info FIFO (a model)");
    snprintf(args, sizeof args, "generate -m /dev/zero -p x");
    expect(args, 1, "is a character device, not a regular file", "generate -m /dev/zero");
    snprintf(args, sizeof args, "convert-llama2c %s %s %s/out.gguf", fifo, fifo, tmpdir);
    expect(args, 1, "is a FIFO, not a regular file", "convert-llama2c FIFO");
    unlink(fifo);
}

static void test_nul_context(void) {
    char path[128], args[8192];
    snprintf(path, sizeof path, "%s/nul.txt", tmpdir);
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite("Lily had\0 a dog.", 1, 16, f);
    fclose(f);
    snprintf(args, sizeof args, "ask -m %s --context %s -q Why?", model_path, path);
    expect(args, 1, "has a NUL byte at offset 8", "ask --context with a NUL byte");
    unlink(path);
}

static void test_options(void) {
    char args[8192], save[128];
    snprintf(args, sizeof args, "generate -m %s --seed 18446744073709551616", model_path);
    expect(args, 2, "want an integer from 0 to 18446744073709551615", "--seed 2^64");
    snprintf(args, sizeof args, "generate -m %s --seed -1", model_path);
    expect(args, 2, "want an integer from 0 to 18446744073709551615", "--seed -1");
    snprintf(args, sizeof args, "generate -m %s --branches 100000", model_path);
    expect(args, 2, "bad --branches '100000' (want an integer from 1 to 65536)", "--branches 100000");
    snprintf(args, sizeof args, "generate -m %s -t 99999999999999999999", model_path);
    expect(args, 2, "want an integer from 1 to 1024", "-t beyond 64 bits");
    snprintf(args, sizeof args, "generate -m %s --temp 1e999", model_path);
    expect(args, 2, "bad --temp '1e999'", "--temp overflowing to infinity");
    /* finite as a double, infinite as the float it is kept in (it failed later, "alpha inf") */
    snprintf(args, sizeof args, "beam -m %s -p Once --alpha 1e300", model_path);
    expect(args, 2, "bad --alpha '1e300' (want a finite number)", "--alpha 1e300");
    /* the largest seed is kept whole, not clamped to 2^63 - 1 */
    snprintf(save, sizeof save, "%s/seed.json", tmpdir);
    snprintf(args, sizeof args, "cot -m %s -p Once -k 2 -n 3 -q --seed 18446744073709551615 "
             "--save %s", model_path, save);
    int st;
    char *out = run_bounded(&st, args), *text = NULL;
    FILE *f = fopen(save, "rb");
    if (f) {
        text = calloc(1, 1 << 16);
        if (text) (void)!fread(text, 1, (1 << 16) - 1, f);
        fclose(f);
    }
    T_CHECK(st == 0 && text && strstr(text, "\"seed\": \"18446744073709551615\""),
            "--seed 2^64 - 1 is saved whole: exit %d: %s", st, out);
    free(text);
    free(out);
    unlink(save);
}

/* No ESC or BEL byte in out, and the escaped form of ESC present. */
static void expect_escaped(const char *out, int st, const char *what) {
    T_CHECK(out && !strchr(out, 0x1b) && !strchr(out, 0x07) && strstr(out, "\\x1b"),
            "%s: exit %d, output with a raw control byte or no escape: %s", what, st, out);
}

static void test_escapes(void) {
    char gg[128], sess[128], args[8192];
    snprintf(gg, sizeof gg, "%s/evil.gguf", tmpdir);
    snprintf(sess, sizeof sess, "%s/evil.json", tmpdir);
    gguf_writer *w = gguf_writer_init();
    float one = 1;
    int64_t ne[1] = {1};
    st_err err = {0};
    T_CHECK(w && !gguf_writer_set_str(w, "general.architecture", "llama") &&
                !gguf_writer_set_str(w, "evil\x1b]0;pwned\x07key", "v") &&
                !gguf_writer_set_str(w, "tokenizer.ggml.model", "\x1b[2J") &&
                !gguf_writer_add_tensor(w, "t\x1b[31m", DT_F32, 1, ne, &one) &&
                !gguf_writer_write(w, gg, &err),
            "write a GGUF with control bytes in its names: %s", err.msg);
    gguf_writer_free(w);
    int st;
    snprintf(args, sizeof args, "info --tensors %s", gg);
    char *out = run_bounded(&st, args);
    expect_escaped(out, st, "info");
    free(out);
    FILE *f = fopen(sess, "w");
    if (f) {
        fputs("{\"format\": \"multidecode-session\", \"version\": 1, \"model\": {\"file\": "
              "\"m\\u001b[H\", \"size\": 0, \"sha256\": \"\", \"n_vocab\": 0}, \"settings\": "
              "{\"sampler\": {\"temp\": 0.8, \"top_k\": 40, \"top_p\": 0.95, \"min_p\": 0.05, "
              "\"seed\": 1}, \"chat_template\": \"\\u001b[2J\", \"extra\": {\"k\\u001b[31m\": "
              "\"\\u001b]0;x\\u0007\"}}, \"forest\": {\"n_slots\": 4, \"top_k\": 0, \"nodes\": []}}",
              f);
        fclose(f);
    }
    snprintf(args, sizeof args, "session info %s", sess);
    out = run_bounded(&st, args);
    expect_escaped(out, st, "session info");
    T_CHECK(out && st == 0 && strstr(out, "setting: k\\x1b[31m = \\x1b]0;x\\x07") &&
                strstr(out, "chat template: \\x1b[2J") && strstr(out, "'m\\x1b[H'"),
            "session info shows each field escaped: %s", out);
    free(out);
    unlink(gg), unlink(sess);
}

/* The program loads no CUDA library when it starts (a build with nvcc has its cuda
 * backend in multidecode-cuda.so beside it, loaded for --backend cuda only); asked for
 * it without a device, or in a build without it, it says to use the cpu and exits 1. */
static void test_cuda_lazy(void) {
    int st;
    char *out = t_runf(&st, "LD_TRACE_LOADED_OBJECTS=1 %s 2>&1", bin);
    T_CHECK(out && st == 0 && strstr(out, "libc.so") && !strstr(out, "libcublas") &&
                !strstr(out, "libcudart"),
            "a start loads no CUDA library: %s", out ? out : "(no output)");
    free(out);
    out = t_runf(&st, "timeout 60 %s generate -m %s --backend cuda -p x -n 1 -q 2>&1", bin, model_path);
    T_CHECK(out && (st == 0 || (st == 1 && strstr(out, "--backend cpu"))),
            "--backend cuda runs, or says to use the cpu and exits 1 (got %d): %s", st,
            out ? out : "(no output)");
    free(out);
}

/* margins with more chunks than it holds (a 20,000-byte context cut into 1-token chunks)
 * refuses the run naming the limit, and frees only what it made (a double free
 * past the 1,024-entry array, exit 134). */
static void test_margins_chunks(void) {
    char path[128], args[8192];
    snprintf(path, sizeof path, "%s/long.txt", tmpdir);
    FILE *f = fopen(path, "wb");
    if (!f) return;
    for (int i = 0; i < 1000; i++) fputs("Lily saw a dog. ", f);
    fclose(f);
    snprintf(args, sizeof args, "margins -m %s --context %s -q Why? --chunk 1", model_path, path);
    expect(args, 1, "at most 1024 (raise --chunk)", "margins with 16,000 one-token chunks");
    unlink(path);
}

/* One check for every sampler setting: an option out of range is refused with the message
 * :set and the session loader give; a session file with such a value (an old autosave)
 * loads its tree with the setting at its default and a warning. */
static void test_sampler_settings(void) {
    char args[8192], save[128], bad[128];
    snprintf(args, sizeof args, "generate -m %s --top-k -5", model_path);
    expect(args, 2, "'top_k' is -5, want an integer from 0 to 1073741824", "--top-k -5");
    snprintf(args, sizeof args, "generate -m %s --temp -1", model_path);
    expect(args, 2, "'temp' is -1, want a finite number, 0 or more", "--temp -1");
    snprintf(args, sizeof args, "generate -m %s --min-p 1", model_path);
    expect(args, 2, "'min_p' is 1, want 0 <= P < 1", "--min-p 1");
    snprintf(save, sizeof save, "%s/s.json", tmpdir);
    snprintf(bad, sizeof bad, "%s/bad.json", tmpdir);
    snprintf(args, sizeof args, "cot -m %s -p Once -k 2 -n 3 -q --save %s", model_path, save);
    expect(args, 0, "", "cot --save");
    int st;
    char *out = t_runf(&st, "sed 's/\"top_k\": 40/\"top_k\": -5/' %s > %s && grep -c '\"top_k\": -5' %s",
                       save, bad, bad);
    T_CHECK(out && atoi(out) == 1, "a session with top_k -5: %s", out);
    free(out);
    snprintf(args, sizeof args, "session info %s", bad);
    out = run_bounded(&st, args);
    T_CHECK(out && st == 0 && strstr(out, "'top_k' is -5, want an integer from 0 to 1073741824") &&
                strstr(out, "top-k 40") && strstr(out, "forest: 8 nodes"),
            "a session with a bad setting loads, the setting reset with a warning (exit %d): %s",
            st, out);
    free(out);
    unlink(save), unlink(bad);
}

/* generate prints a model's text with its control bytes escaped when stdout is a
 * terminal (a token piece with an OSC sequence set the terminal's title), and byte for
 * byte through a pipe. The prompt's text goes through the same stream as the
 * generated tokens, so a prompt with ESC and BEL bytes stands for a hostile vocabulary. */
static void test_generate_tty(void) {
    if (access("/usr/bin/script", X_OK) != 0) {
        T_SKIP("needs script(1) for a terminal");
        return;
    }
    int st;
    char *out = t_runf(&st, "timeout 20 script -qec \"%s generate -m %s -p \\\"\\$(printf "
                       "'Once\\033]0;x\\007 upon')\\\" -n 2 -q\" /dev/null 2>&1", bin, model_path);
    T_CHECK(out && st == 0 && !strchr(out, 0x1b) && !strchr(out, 0x07) &&
                strstr(out, "Once\\x1b]0;x\\x07 upon"),
            "generate on a terminal escapes control bytes (exit %d): %s", st, out);
    free(out);
    out = t_runf(&st, "timeout 20 %s generate -m %s -p \"$(printf 'Once\\033]0;x\\007 upon')\" "
                 "-n 2 -q 2>/dev/null", bin, model_path);
    T_CHECK(out && st == 0 && strstr(out, "Once\x1b]0;x\x07 upon"),
            "generate through a pipe is byte-exact (exit %d): %s", st, out);
    free(out);
}

/* The cuda backend's shared object is checked before it is loaded (a truncated
 * one crashed the program with SIGBUS inside dlopen), and a missing one is reported with
 * the places it was looked for. The program is copied into a folder of its own, with a
 * damaged copy of its plugin beside it. */
static void test_cuda_plugin(void) {
    char dir[160], so[200], args[8192];
    snprintf(dir, sizeof dir, "%s/prog", tmpdir);
    snprintf(so, sizeof so, "%s/multidecode-cuda.so", dir);
    int st;
    char *out = t_runf(&st, "mkdir -p %s && cp %s %s/multidecode 2>&1", dir, bin, dir);
    free(out);
    snprintf(args, sizeof args, "%s/multidecode generate -m %s --backend cuda -p x -n 1 -q 2>&1",
             dir, model_path);
    out = t_runf(&st, "timeout 20 %s", args);
    T_CHECK(out && st == 1 && strstr(out, dir) && strstr(out, "multidecode-cuda.so") &&
                !strstr(out, "this build has no CUDA backend"),
            "a missing plugin: the message says where it was looked for (exit %d): %s", st, out);
    free(out);
    char plugin[600];
    snprintf(plugin, sizeof plugin, "%s/multidecode-cuda.so", dirname_of(bin));
    if (access(plugin, R_OK) != 0) {
        T_SKIP("no %s in this build (no nvcc)", plugin);
    } else {
        out = t_runf(&st, "head -c 100000 %s > %s && timeout 20 %s", plugin, so, args);
        T_CHECK(out && st == 1 && strstr(out, so) && strstr(out, "100000 bytes"),
                "a truncated plugin is refused naming its size (exit %d): %s", st, out);
        free(out);
        out = t_runf(&st, "cp %s %s && printf 'XXXX' | dd of=%s bs=1 seek=5000 conv=notrunc "
                     "2>/dev/null && timeout 20 %s", plugin, so, so, args);
        T_CHECK(out && st == 1 && strstr(out, so) && strstr(out, "checksum"),
                "a damaged plugin of the right size is refused (exit %d): %s", st, out);
        free(out);
    }
    out = t_runf(&st, "rm -rf %s", dir);
    free(out);
}

/* Reads up to cap - 1 bytes of path into buf ("" when it cannot be read). */
static void slurp_small(const char *path, char *buf, size_t cap) {
    buf[0] = '\0';
    FILE *f = fopen(path, "rb");
    if (!f) return;
    buf[fread(buf, 1, cap - 1, f)] = '\0';
    fclose(f);
}

/* Every file the program writes refuses a target that is not a regular file (a FIFO
 * blocked `plan --svg` forever; a device was replaced by a file) and never writes through
 * a link, neither the target nor a link planted at the old temporary name. */
static void test_write_targets(void) {
    char fifo[128], victim[128], link[128], args[8192], buf[64];
    snprintf(fifo, sizeof fifo, "%s/out.fifo", tmpdir);
    snprintf(victim, sizeof victim, "%s/victim", tmpdir);
    snprintf(link, sizeof link, "%s/link.svg", tmpdir);
    FILE *v = fopen(victim, "w");
    if (v) fputs("precious", v), fclose(v);
    if (mkfifo(fifo, 0600) == 0) {
        snprintf(args, sizeof args, "plan -m %s -p Once -s 1 --svg %s", model_path, fifo);
        expect(args, 1, "is a FIFO, not a regular file", "plan --svg FIFO");
        snprintf(args, sizeof args, "mkmodel %s", fifo);
        expect(args, 1, "is a FIFO, not a regular file", "mkmodel FIFO");
        unlink(fifo);
    }
    T_CHECK(symlink(victim, link) == 0, "plant a link as the picture");
    snprintf(args, sizeof args, "plan -m %s -p Once -s 1 --svg %s", model_path, link);
    expect(args, 1, "is a symbolic link", "plan --svg LINK");
    slurp_small(victim, buf, sizeof buf);
    T_CHECK(!strcmp(buf, "precious"), "plan --svg wrote through a link: \"%s\"", buf);
    unlink(link);
    char out[128], tmp[140];
    snprintf(out, sizeof out, "%s/m.gguf", tmpdir);
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    T_CHECK(symlink(victim, tmp) == 0, "plant a link at m.gguf.tmp");
    snprintf(args, sizeof args, "mkmodel %s", out);
    expect(args, 0, "", "mkmodel beside a planted link");
    slurp_small(victim, buf, sizeof buf);
    T_CHECK(!strcmp(buf, "precious"), "mkmodel wrote through the link at m.gguf.tmp: \"%s\"", buf);
    unlink(tmp), unlink(out);
    /* a device node (as root; skipped where mknod is not allowed) stays a device */
    char dev[128];
    struct stat sb;
    snprintf(dev, sizeof dev, "%s/null", tmpdir);
    if (mknod(dev, S_IFCHR | 0666, makedev(1, 3)) == 0) {
        snprintf(args, sizeof args, "mkmodel %s", dev);
        expect(args, 1, "is a character device, not a regular file", "mkmodel onto a device");
        T_CHECK(lstat(dev, &sb) == 0 && S_ISCHR(sb.st_mode), "the device node was replaced");
        unlink(dev);
    } else {
        T_SKIP("mknod not allowed here");
    }
    unlink(victim);
}

int main(void) {
    if (!t_cli_setup(bin, sizeof bin, model_path, sizeof model_path)) return t_done();
    snprintf(tmpdir, sizeof tmpdir, "/tmp/md_test_cli_hostile_XXXXXX");
    if (!mkdtemp(tmpdir)) return 1;
    test_not_regular();
    test_nul_context();
    test_options();
    test_escapes();
    test_cuda_lazy();
    test_margins_chunks();
    test_write_targets();
    test_sampler_settings();
    test_generate_tty();
    test_cuda_plugin();
    rmdir(tmpdir);
    return t_done();
}
