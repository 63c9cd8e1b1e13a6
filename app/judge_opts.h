/* judge_opts.h - the judge's options that `judge` and `tot` share (-j, --judge-file, --yes,
 * --no), and its tokens for an open model (engine/strategy/judge.h's judge_tokens). */
#ifndef MD_JUDGE_OPTS_H
#define MD_JUDGE_OPTS_H

#include "prompt.h"
#include "strategy/judge.h"

enum { JUDGE_OPT_FILE = 1100, JUDGE_OPT_YES, JUDGE_OPT_NO };

#define JUDGE_OPTS_LONGOPTS                                                              \
    {"judge", 1, 0, 'j'}, {"judge-file", 1, 0, JUDGE_OPT_FILE}, {"yes", 1, 0, JUDGE_OPT_YES}, \
        {"no", 1, 0, JUDGE_OPT_NO}
#define JUDGE_OPTS_HELP                                                                       \
    "  -j, --judge TEXT     the judge's question (default: \"" JUDGE_DEFAULT_QUESTION "\")\n" \
    "      --judge-file F   the question read from file F\n"                                  \
    "      --yes TEXT       the answer that counts for (default Yes with a chat\n"            \
    "                       template, \" yes\" without)\n"                                    \
    "      --no TEXT        the answer that counts against (default No / \" no\"; '' = none:\n" \
    "                       the score is log P(yes) alone)\n"

typedef struct app_judge_opts {
    const char *question, *yes, *no; /* NULL: the defaults */
    char *file_text;                 /* owned: --judge-file's text */
} app_judge_opts;

/* Handles option ch (j and the JUDGE_OPT_* values). Returns 0 when handled, 1 after
 * printing an error (a file that cannot be read), -1 when ch is not one of them. */
int app_judge_opt(app_judge_opts *o, int ch, const char *arg);
void app_judge_opts_free(app_judge_opts *o);
/* The judge's tokens for pm's tokenizer in template kind (judge_tokens). */
st_code app_judge_tokens(const prompt_model *pm, chat_kind kind, const app_judge_opts *o, judge_prompt *out,
                         st_err *err);

#endif
