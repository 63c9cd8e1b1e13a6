/* main.c - argv to a subcommand. The only place that calls exit(). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "strategy/strategy.h"

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
    {"tour", cmd_tour, "a guided tour: a small forest built step by step, each screen explained"},
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
    const strategy_ops *ops; /* and every strategy that brings its own grammar */
    for (int32_t i = 0; (ops = strategy_at(i)); i++) {
        const char *gap = ops->usage ? strstr(ops->usage, "  ") : NULL;
        if (gap) fprintf(f, "  %-16s %s\n", ops->name, gap + strspn(gap, " "));
    }
    fprintf(f, "\n'multidecode COMMAND --help' describes a command's options.\n");
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
    const strategy_ops *ops = strategy_find(argv[1]);
    if (ops && ops->usage) exit(cmd_strategy(ops, argc - 1, argv + 1));
    fprintf(stderr, "multidecode: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    exit(2);
}
