/* main.c - argv to a subcommand. The only place that calls exit(). */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "prompt.h"
#include "strategy/cot.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} command;

static const command commands[] = {
    {"info", cmd_info, "show a GGUF model's metadata, hyperparameters, tensors and tokenizer"},
    {"generate", cmd_generate, "generate text from a prompt (or --branches K continuations at once)"},
    {"ask", cmd_ask, "answer several questions over one shared context, in parallel"},
    {"cot", cmd_cot, "k chains of thought with distinct first tokens, grown together; vote"},
    {"judge", cmd_judge, "the model judges branches (given, or k chains grown) in one step; best first"},
    {"tot", cmd_tot, "tree of thoughts: grow k thoughts per kept node, judge them together, keep b"},
    {"beam", cmd_beam, "beam search over one shared KV cache; print the B best with scores"},
    {"margins", cmd_margins, "notes on every chunk of a long text in parallel, then an answer"},
    {"plan", cmd_plan, "show how forest steps are packed: order, positions, slots, masks"},
    {"bench", cmd_bench, "measure decode, forest and ask throughput (JSON on stdout)"},
    {"convert-llama2c", cmd_convert_llama2c, "convert a llama2.c checkpoint + tokenizer to GGUF"},
    {"mkmodel", cmd_mkmodel, "write a random-weight llama GGUF (tests, benchmarks)"},
    {"tui", cmd_tui, "the interactive forest explorer (also: multidecode -m MODEL [PROMPT])"},
    {"session", cmd_session, "show a saved session, or export its tree's texts as Markdown"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: multidecode COMMAND [OPTIONS]\n"
               "       multidecode -m MODEL [PROMPT]   (the TUI)\n"
               "       multidecode --version | --help\n\n"
               "Decodes a forest of token sequences of a llama-family GGUF model.\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-16s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\n'multidecode COMMAND --help' describes a command's options.\n");
}

int app_fail(const st_err *err) {
    /* messages quote names read from files (keys, tensors, settings): escaped */
    fputs("multidecode: ", stderr);
    prompt_show_bare(stderr, err->msg[0] ? err->msg : st_str(err->code));
    fputc('\n', stderr);
    return 1;
}

int app_usage_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("multidecode: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 2;
}

int app_parse_int(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    char *end;
    errno = 0; /* strtoll clamps an out-of-range number and says so only in errno */
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || errno || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

int app_parse_float(const char *s, double *out) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !isfinite((float)v)) return -1; /* kept as a float */
    *out = v;
    return 0;
}

int app_opt_int(const char *name, const char *s, int64_t lo, int64_t hi, int64_t *out) {
    if (!app_parse_int(s, lo, hi, out)) return 0;
    return app_usage_error("bad %s '%s' (want an integer from %lld to %lld)", name, s,
                           (long long)lo, (long long)hi);
}

int app_opt_u64(const char *name, const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    /* strtoull negates "-1" into a huge value: a sign is refused, not wrapped */
    if (end == s || *end || errno || strchr(s, '-'))
        return app_usage_error("bad %s '%s' (want an integer from 0 to %llu)", name, s,
                               (unsigned long long)UINT64_MAX);
    *out = v;
    return 0;
}

int app_vote_opt(int ch, int o_vote, const char *arg, struct cot_vote_spec *vote, bool *json, bool *quiet) {
    st_err err = {0};
    if (ch == o_vote) return cot_vote_parse(arg, vote, &err) ? app_usage_error("%s", err.msg) : 0;
    if (ch == 'J') *json = true;
    else if (ch == 'q') *quiet = true;
    else return -1;
    return 0;
}

int app_opt_end(int argc, char **argv, const char *model, const char *cmd) {
    if (optind < argc) return app_usage_error("unexpected argument '%s'", argv[optind]);
    if (!model) return app_usage_error("%s needs a model: -m MODEL", cmd);
    return -1;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        exit(2);
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
        printf("multidecode %s\n", MD_VERSION);
        exit(0);
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        exit(0);
    }
    /* options first: the TUI (`multidecode -m MODEL [PROMPT]`) */
    if (argv[1][0] == '-' && strcmp(argv[1], "-")) exit(cmd_tui(argc, argv));
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) exit(commands[i].run(argc - 1, argv + 1));
    fprintf(stderr, "multidecode: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    exit(2);
}
