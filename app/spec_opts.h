/* spec_opts.h - the command-line options of exact speculative decoding
 * (engine/spec/spec.h), shared by generate, plan and bench spec: --draft turns it on with
 * prompt-lookup and n-gram-pool drafts, --lookahead W,N,G adds lookahead decoding's
 * window, and the rest tune the drafts. */
#ifndef MD_SPEC_OPTS_H
#define MD_SPEC_OPTS_H

#include <stdbool.h>

#include "spec/spec.h"

enum { SPEC_OPT_DRAFT = 1000, SPEC_OPT_LEN, SPEC_OPT_N, SPEC_OPT_ROWS, SPEC_OPT_LA, SPEC_OPT_FIXED,
       SPEC_OPT_LA_ALWAYS };

#define SPEC_LONGOPTS                                                                      \
    {"draft", 0, 0, SPEC_OPT_DRAFT}, {"draft-len", 1, 0, SPEC_OPT_LEN},                    \
        {"drafts", 1, 0, SPEC_OPT_N}, {"draft-rows", 1, 0, SPEC_OPT_ROWS},                 \
        {"lookahead", 1, 0, SPEC_OPT_LA}, {"draft-fixed", 0, 0, SPEC_OPT_FIXED},           \
        {"lookahead-always", 0, 0, SPEC_OPT_LA_ALWAYS}
#define SPEC_HELP                                                                          \
    "      --draft          exact speculative decoding: drafts from prompt lookup and an\n" \
    "                       n-gram pool of the text so far, verified as a tree in one\n"    \
    "                       forest step. Greedy (the output equals plain greedy) unless\n"  \
    "                       --temp T > 0 is given: then exact speculative sampling, the\n"  \
    "                       very tokens of plain sampling with the same --seed\n"           \
    "      --lookahead W,N,G  add lookahead decoding's window (W columns, N-grams, at\n"    \
    "                       most G pool drafts per step; implies --draft). The window\n"   \
    "                       runs while its n-grams pay for its rows (and now and then)\n"   \
    "      --lookahead-always  run the window at every step\n"                             \
    "      --draft-len K    most tokens per draft (default 8; 0: lookahead drafts only)\n" \
    "      --drafts M       most prompt-lookup drafts per step (default 4)\n"               \
    "      --draft-rows R   most draft-tree nodes per step (default 16)\n"                  \
    "      --draft-fixed    always draft --draft-len tokens (default: adapt the length to\n" \
    "                       the recent acceptance)\n"

typedef struct spec_opts {
    bool on;
    spec_params sp;
} spec_opts;

spec_opts spec_default_opts(void);
/* Handles one getopt character: -1 when it is not one of these, 0 when taken, 2 after
 * a usage error (printed). */
int spec_opt(spec_opts *o, int ch, const char *arg);
/* "lookup" or "lookahead W,N,G" (+ lookup) for reports. */
const char *spec_opts_describe(const spec_opts *o, char *buf, int cap);

#endif
