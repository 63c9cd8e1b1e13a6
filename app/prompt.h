/* prompt.h - what the decoding commands (generate, plan, ask) share: parsing the common
 * model and sampling options, opening a model with its tokenizer and KV cache, turning a
 * user's text into prompt tokens (as it is, or rendered with a chat template), collecting
 * the tokens of grown branches, and writing token text safely (escaped for one terminal
 * line or for a JSON string).
 *
 * Not here: the forest and its steps (engine/forest/forest.h, engine/forest/step.h, engine/strategy/grow.h);
 * this is app-level glue over them. Functions that can fail return a status code (or
 * NULL) with err set, for the command to pass to app_fail. */
#ifndef MD_PROMPT_H
#define MD_PROMPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tok/chat.h"
#include "model/model.h"
#include "forest/sample.h"
#include "tok/tok.h"

/* ---- common options ---- */

/* getopt_long entries of the model options (-m, -t, -c, --backend) and of the sampling
 * options (--temp, --top-k, --top-p, --min-p, --seed), to put in a command's table. */
#define PROMPT_MODEL_LONGOPTS                                                      \
    {"model", 1, 0, 'm'}, {"threads", 1, 0, 't'}, {"ctx", 1, 0, 'c'},              \
        {"backend", 1, 0, 'B'}
#define PROMPT_SAMPLE_LONGOPTS                                                     \
    {"temp", 1, 0, 'T'}, {"top-k", 1, 0, 'K'}, {"top-p", 1, 0, 'P'},               \
        {"min-p", 1, 0, 'M'}, {"seed", 1, 0, 'S'}
/* Their help lines. */
#define PROMPT_MODEL_HELP                                                                  \
    "  -m, --model PATH     GGUF model file\n"                                             \
    "  -t, --threads N      CPU threads (default: one per core)\n"                         \
    "  -c, --ctx N          KV cache size in tokens (default: min(model context, 4096))\n" \
    "      --backend NAME   cpu (default), ref, or cuda (a GPU build)\n"
#define PROMPT_SAMPLE_HELP                                                               \
    "      --top-k K        keep the K most likely tokens (default 40; 0 = off)\n"       \
    "      --top-p P        nucleus sampling mass (default 0.95; 1 = off)\n"             \
    "      --min-p P        drop tokens below P x the best probability (default 0.05)\n" \
    "      --seed S         sampler seed (default 1)\n"

/* The chat options' help lines that beam, cot, judge and tot share (each says --chat in
 * its own words above them). */
#define PROMPT_CHAT_HELP                                                                    \
    "      --system TEXT    system message for --chat (implies --chat)\n"                  \
    "      --chat-template NAME  template to use instead of the model's (implies --chat)\n" \
    "      --raw            never apply a chat template (default: the model's, when it\n"  \
    "                       has one and the prompt is not empty)\n"

typedef struct prompt_model_opts {
    const char *path;    /* GGUF file; NULL until -m */
    const char *backend; /* "cpu" or "ref" */
    int32_t threads;     /* 0: one per core */
    int32_t n_ctx;       /* KV cache slots; 0: the model's default */
} prompt_model_opts;

prompt_model_opts prompt_model_default_opts(void);

/* Handles option ch (one of m t c B) with its argument. Returns 0 when handled, 2 after
 * printing a usage error (return it from the command), -1 when ch is not one of them. */
int prompt_model_opt(prompt_model_opts *o, int ch, const char *arg);
/* The same for the sampling options (T K P M S). */
int prompt_sample_opt(sample_params *sp, int ch, const char *arg);

/* ---- model, tokenizer, cache ---- */

typedef struct prompt_model {
    model *m;        /* owned */
    tok *tk;         /* owned */
    model_ctx *ctx;  /* owned; its KV cache has n_slots slots */
    int32_t n_slots;
} prompt_model;

/* model_ctx_default_params with what the environment asks of every context: MD_NO_PACK
 * set (and not "0") computes with the weights as stored (no_pack). */
model_ctx_params prompt_ctx_params(void);

/* Loads the model and its tokenizer and allocates the KV cache. On failure everything is
 * freed, pm is zeroed and err says why (ST_ERR_IO, ST_ERR_FORMAT, ST_ERR_UNSUPPORTED...). */
st_code prompt_model_open(prompt_model *pm, const prompt_model_opts *o, st_err *err);
void prompt_model_close(prompt_model *pm); /* zeroed or closed: a no-op */

/* ---- prompts ---- */

typedef struct prompt_chat {
    bool on;            /* render the text as a user message with a chat template */
    bool raw;           /* --raw: never apply a template */
    const char *tmpl;   /* template name (chat_from_name); NULL: the model's own */
    const char *system; /* system message; NULL: the template's default, if it has one */
    bool think_off;     /* --think off: the template's thinking switch off (Qwen3) */
} prompt_chat;

#define PROMPT_OPT_THINK 0x154 /* --think's getopt value: no short option */
/* getopt_long entries of the chat options (--chat, --system, --chat-template, --raw,
 * --think on|off). */
#define PROMPT_CHAT_LONGOPTS                                                        \
    {"chat", 0, 0, 'C'}, {"system", 1, 0, 'Y'}, {"chat-template", 1, 0, 'E'},      \
        {"raw", 0, 0, 'R'}, {"think", 1, 0, PROMPT_OPT_THINK}
/* Handles option ch (one of C Y E R, PROMPT_OPT_THINK): --system, --chat-template and
 * --think imply --chat. Returns 0 when handled, 2 after printing a usage error, -1 when
 * ch is not one of them. */
int prompt_chat_opt(prompt_chat *pc, int ch, const char *arg);
/* After parsing: 2 (usage error printed) when --raw was combined with the others. */
int prompt_chat_check(const prompt_chat *pc);

/* "chatml, llama3, ..." into buf (for messages); returns buf. */
const char *prompt_chat_names(char *buf, size_t cap);
/* The chat template family of the model's tokenizer.chat_template (CHAT_NONE if none or
 * unknown). */
chat_kind prompt_model_chat(const gguf_ctx *g);
/* The one rule of every command and the TUI for chat or raw: text (NULL: a context, never
 * empty) is a user message in a chat template when a template is named or the model has
 * one and the text is not empty (an empty prompt starts from BOS), unless --raw. Turns
 * pc->on on, never off (--chat, --system and --think asked for it already). */
void prompt_chat_decide(prompt_chat *pc, const model *m, const char *text);

/* The prompt tokens of text: with pc->on, text is the user message rendered with the
 * template (special tokens parsed, BOS added unless the template writes it); otherwise
 * the text as it is, with BOS when the model adds one. Returns a malloc'd array of *n
 * tokens (caller frees) and sets *kind (may be NULL) to the template used; NULL + err:
 * ST_ERR_ARG when no template is known or the prompt is empty and there is no BOS,
 * ST_ERR_NOMEM. */
int32_t *prompt_tokens(const prompt_model *pm, const prompt_chat *pc, const char *text,
                       int32_t *n, chat_kind *kind, st_err *err);
/* "chat template: NAME" (and "(detected)" when it came from the model) on stderr when a
 * template is in use, unless quiet. */
void prompt_report_chat(const prompt_chat *pc, chat_kind kind, bool quiet);
/* Tokens of text as it is, with or without BOS (no special tokens); *n may be 0 (the
 * returned array then still must be freed). NULL + ST_ERR_NOMEM. */
int32_t *prompt_encode_raw(const tok *tk, const char *text, bool add_bos, int32_t *n,
                           st_err *err);
/* ST_ERR_CONTEXT with a message naming both sizes and the -c option when need > n_slots;
 * what describes the tokens ("the prompt"). ST_OK otherwise. */
st_code prompt_check_fits(int32_t need, int32_t n_slots, const char *what, st_err *err);
/* What a command that decodes one prompt does first: opens the model (prompt_model_open),
 * takes the prompt's tokens (prompt_tokens; the template reported unless quiet) and checks
 * that they and `extra` more fit the KV cache (prompt_check_fits; what names them).
 * Returns the tokens (*n of them, caller frees; *kind as prompt_tokens sets it), pm open;
 * or NULL + err with pm closed. */
int32_t *prompt_open_with(prompt_model *pm, const prompt_model_opts *mo, const prompt_chat *pc,
                          const char *text, int32_t extra, const char *what, bool quiet,
                          int32_t *n, chat_kind *kind, st_err *err);

/* Text files (a context) larger than this are refused: their tokens could not fit the
 * largest KV cache (-c 16M) anyway. */
#define PROMPT_MAX_FILE ((size_t)256 << 20)

/* What a command over a text file (ask's and margins' context) does first: reads the
 * whole file into a NUL-terminated string (ST_ERR_IO naming the file and the reason when
 * it cannot: missing, not a regular file, over PROMPT_MAX_FILE bytes; ST_ERR_ARG when it
 * holds a NUL byte), then opens the model (prompt_model_open). Returns the text (caller frees)
 * with pm open; or NULL + err with nothing left open. */
char *prompt_open_file(prompt_model *pm, const prompt_model_opts *mo, const char *path,
                       const char *what, st_err *err);

/* ---- branch output ---- */

/* A growable token list, filled by prompt_emit (a grow_emit_fn whose user data is an
 * array of these, one per branch). */
typedef struct prompt_toks {
    int32_t *t;
    int32_t n, cap;
} prompt_toks;

void prompt_emit(void *ud, int32_t branch, int32_t token, float logprob);
void prompt_toks_free(prompt_toks *v, int32_t n); /* frees n lists' arrays */

/* The text that gen[0..n_gen) adds after prompt[0..n_prompt): the streamed detokenisation
 * of both, minus the prompt's part (so the first token is decoded in context). Returns a
 * malloc'd string, NULL when out of memory. */
char *prompt_continuation(const tok *tk, const int32_t *prompt, int32_t n_prompt,
                          const int32_t *gen, int32_t n_gen);

/* The text of token id as it reads after token prev (-1: at the start of a stream), for
 * display; a byte token that does not complete a character shows its piece. Written to
 * out (cap > 0, NUL-terminated, cut short when it does not fit). */
void prompt_token_text(const tok *tk, int32_t prev, int32_t id, char *out, size_t cap);

/* s as a JSON string literal, quotes included (control characters escaped). */
void prompt_json_str(FILE *f, const char *s);
/* s on one line for a terminal: quotes included, \n \t \\ \" and other control bytes
 * escaped, cut after max_chars characters with "..." (0: no cut). */
void prompt_show_str(FILE *f, const char *s, int max_chars);
/* s as it is but for its control bytes (\n \t \r, others as \xXX), so that text from a
 * file (a metadata key, a setting, an error message naming one) cannot send escape
 * sequences to the terminal. Returns the bytes written (for padding columns). */
int prompt_show_bare(FILE *f, const char *s);
/* A model's text (generated or echoed) to f: on a terminal, its control bytes other than
 * newline and tab are shown escaped (\r, \xXX), so that a hostile vocabulary cannot send
 * escape sequences; to a file or a pipe, byte for byte. */
void prompt_put_text(FILE *f, const char *s);

#endif
