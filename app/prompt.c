/* prompt.c - the glue generate, plan and ask share: common options, opening a model,
 * prompt text to tokens (raw or through a chat template), branch token lists and their
 * text, and escaped token text for terminals and JSON. */
#include "prompt.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/infile.h"
#include "app.h"

/* ---- common options ---- */

prompt_model_opts prompt_model_default_opts(void) {
    return (prompt_model_opts){.path = NULL, .backend = "cpu", .threads = 0, .n_ctx = 0};
}

int prompt_model_opt(prompt_model_opts *o, int ch, const char *arg) {
    int64_t v;
    switch (ch) {
    case 'm': o->path = arg; return 0;
    case 'B': o->backend = arg; return 0;
    case 't':
        if (app_opt_int("-t", arg, 1, 1024, &v)) return 2;
        o->threads = (int32_t)v;
        return 0;
    case 'c':
        if (app_opt_int("-c", arg, 1, 1 << 24, &v)) return 2;
        o->n_ctx = (int32_t)v;
        return 0;
    default: return -1;
    }
}

int prompt_chat_opt(prompt_chat *pc, int ch, const char *arg) {
    char names[128];
    switch (ch) {
    case 'C': pc->on = true; return 0;
    case 'Y': pc->system = arg; pc->on = true; return 0;
    case 'E':
        if (chat_from_name(arg) == CHAT_NONE)
            return app_usage_error("unknown chat template '%s' (known: %s)", arg,
                                   prompt_chat_names(names, sizeof names));
        pc->tmpl = arg;
        pc->on = true;
        return 0;
    case 'R': pc->raw = true; return 0;
    case PROMPT_OPT_THINK:
        if (strcmp(arg, "on") != 0 && strcmp(arg, "off") != 0)
            return app_usage_error("bad --think '%s' (want on or off)", arg);
        pc->think_off = strcmp(arg, "off") == 0;
        pc->on = true;
        return 0;
    default: return -1;
    }
}

int prompt_chat_check(const prompt_chat *pc) {
    if (pc->raw && (pc->on || pc->tmpl || pc->system))
        return app_usage_error("--raw excludes --chat, --system, --chat-template and --think");
    return 0;
}

/* Option opt's argument as the sampler setting name (sample_param_set's check and
 * message). */
static int sample_opt(sample_params *sp, const char *opt, const char *name, const char *arg) {
    double v;
    st_err err = {0};
    if (app_parse_float(arg, &v)) return app_usage_error("bad %s '%s' (want a number)", opt, arg);
    if (sample_param_set(sp, name, v, &err)) return app_usage_error("bad %s '%s': %s", opt, arg, err.msg);
    return 0;
}

int prompt_sample_opt(sample_params *sp, int ch, const char *arg) {
    switch (ch) {
    case 'T': return sample_opt(sp, "--temp", "temp", arg);
    case 'K': return sample_opt(sp, "--top-k", "top_k", arg);
    case 'P': return sample_opt(sp, "--top-p", "top_p", arg);
    case 'M': return sample_opt(sp, "--min-p", "min_p", arg);
    case 'S': return app_opt_u64("--seed", arg, &sp->seed) ? 2 : 0; /* all 64 bits, exactly */
    default: return -1;
    }
}

/* ---- model, tokenizer, cache ---- */

model_ctx_params prompt_ctx_params(void) {
    model_ctx_params cp = model_ctx_default_params();
    const char *no = getenv("MD_NO_PACK");
    cp.no_pack = no && *no && strcmp(no, "0") != 0;
    return cp;
}

st_code prompt_model_open(prompt_model *pm, const prompt_model_opts *o, st_err *err) {
    memset(pm, 0, sizeof *pm);
    pm->m = model_load(o->path, err);
    if (!pm->m) return err->code;
    pm->tk = tok_from_gguf(pm->m->gguf, err);
    if (pm->tk) {
        model_ctx_params cp = prompt_ctx_params();
        cp.n_threads = o->threads;
        cp.backend = o->backend;
        cp.n_slots = o->n_ctx;
        pm->ctx = model_ctx_init(pm->m, &cp, err);
    }
    if (!pm->ctx) {
        st_code rc = err->code;
        prompt_model_close(pm);
        return rc;
    }
    pm->n_slots = model_ctx_n_slots(pm->ctx);
    return ST_OK;
}

void prompt_model_close(prompt_model *pm) {
    model_ctx_free(pm->ctx);
    tok_free(pm->tk);
    model_free(pm->m);
    memset(pm, 0, sizeof *pm);
}

/* ---- prompts ---- */

const char *prompt_chat_names(char *buf, size_t cap) {
    size_t len = 0;
    buf[0] = '\0';
    for (int k = CHAT_NONE + 1; k < CHAT_N_KINDS && len < cap; k++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%s", k > CHAT_NONE + 1 ? ", " : "",
                                chat_name((chat_kind)k));
    return buf;
}

static const char *model_jinja(const gguf_ctx *g) {
    const char *jinja = NULL;
    if (gguf_get_str(g, "tokenizer.chat_template", &jinja, NULL) != ST_OK) jinja = NULL;
    return jinja;
}

chat_kind prompt_model_chat(const gguf_ctx *g) { return chat_detect(model_jinja(g)); }

void prompt_chat_decide(prompt_chat *pc, const model *m, const char *text) {
    if (!pc->raw && (pc->tmpl || (prompt_model_chat(m->gguf) != CHAT_NONE && (!text || *text)))) pc->on = true;
}

/* The chat prompt text: the optional system message (the caller's, else the model's
 * default when its template has one and is the one used) and the user message, rendered
 * with the chosen template (named, else detected). malloc'd; NULL with err set. */
static char *chat_text(const gguf_ctx *g, const prompt_chat *pc, const char *user,
                       chat_kind *kind, st_err *err) {
    const char *jinja = model_jinja(g);
    chat_kind detected = chat_detect(jinja);
    chat_kind k = pc->tmpl ? chat_from_name(pc->tmpl) : detected;
    if (k == CHAT_NONE) {
        char names[128];
        st_set(err, ST_ERR_ARG, "%s; name one with --chat-template (%s) or use --raw",
               jinja ? "the model's tokenizer.chat_template is not one this program knows"
                     : "the model has no chat template (tokenizer.chat_template)",
               prompt_chat_names(names, sizeof names));
        return NULL;
    }
    char *dflt = NULL;
    if (!pc->system && k == detected) {
        size_t n = chat_default_system(jinja, NULL, 0);
        if (n > 0 && (dflt = malloc(n + 1)) == NULL) {
            st_set(err, ST_ERR_NOMEM, "out of memory");
            return NULL;
        }
        if (n > 0) chat_default_system(jinja, dflt, n + 1);
    }
    chat_msg msgs[2];
    size_t n_msgs = 0;
    if (pc->system) msgs[n_msgs++] = (chat_msg){"system", pc->system};
    msgs[n_msgs++] = (chat_msg){"user", user};
    if (pc->think_off && !chat_has_think_switch(jinja)) {
        free(dflt);
        st_set(err, ST_ERR_ARG, "--think off needs a chat template with a thinking switch "
               "(Qwen3's); this model's has none");
        return NULL;
    }
    const char *think = pc->think_off ? chat_think_off_text(k) : "";
    size_t need = chat_apply_with_default(k, dflt, msgs, n_msgs, true, NULL, 0);
    char *text = malloc(need + strlen(think) + 1);
    if (text) {
        chat_apply_with_default(k, dflt, msgs, n_msgs, true, text, need + 1);
        strcpy(text + need, think);
    } else {
        st_set(err, ST_ERR_NOMEM, "out of memory");
    }
    free(dflt);
    *kind = k;
    return text;
}

/* Tokenises text into a malloc'd array (at least one element allocated). */
static int32_t *encode(const tok *tk, const char *text, bool add_bos, bool special, int32_t *n,
                       st_err *err) {
    return tok_encode_alloc(tk, text, strlen(text), add_bos, special, n, err);
}

int32_t *prompt_encode_raw(const tok *tk, const char *text, bool add_bos, int32_t *n,
                           st_err *err) {
    return encode(tk, text, add_bos, false, n, err);
}

void prompt_report_chat(const prompt_chat *pc, chat_kind kind, bool quiet) {
    if (pc->on && !quiet)
        fprintf(stderr, "chat template: %s%s\n", chat_name(kind), pc->tmpl ? "" : " (detected)");
}

int32_t *prompt_tokens(const prompt_model *pm, const prompt_chat *pc, const char *text,
                       int32_t *n, chat_kind *kind, st_err *err) {
    bool add_bos = tok_add_bos(pm->tk), special = false;
    chat_kind k = CHAT_NONE;
    char *rendered = NULL;
    if (pc && pc->on) {
        /* a chat prompt holds special tokens as text, and its template may write BOS */
        rendered = chat_text(pm->m->gguf, pc, text, &k, err);
        if (!rendered) return NULL;
        text = rendered;
        special = true;
        if (chat_includes_bos(k)) add_bos = false;
    }
    int32_t *t = encode(pm->tk, text, add_bos, special, n, err);
    free(rendered);
    if (t && *n == 0) {
        free(t);
        st_set(err, ST_ERR_ARG, "the prompt is empty and the model has no BOS token to start from");
        return NULL;
    }
    if (kind) *kind = k;
    return t;
}

st_code prompt_check_fits(int32_t need, int32_t n_slots, const char *what, st_err *err) {
    if (need <= n_slots) return ST_OK;
    return st_set(err, ST_ERR_CONTEXT, "%s has %d tokens, more than the KV cache of %d "
                  "(raise it with -c)", what, need, n_slots);
}

int32_t *prompt_open_with(prompt_model *pm, const prompt_model_opts *mo, const prompt_chat *pc,
                          const char *text, int32_t extra, const char *what, bool quiet,
                          int32_t *n, chat_kind *kind, st_err *err) {
    if (prompt_model_open(pm, mo, err)) return NULL;
    chat_kind k = CHAT_NONE;
    prompt_chat use = *pc;
    prompt_chat_decide(&use, pm->m, text);
    int32_t *t = prompt_tokens(pm, &use, text, n, &k, err);
    if (t) prompt_report_chat(&use, k, quiet);
    if (t && prompt_check_fits(*n + extra, pm->n_slots, what, err)) {
        free(t);
        t = NULL;
    }
    if (!t) prompt_model_close(pm);
    if (kind) *kind = k;
    return t;
}

/* The whole text file as a malloc'd NUL-terminated string; NULL + err naming the file and
 * the reason. A NUL byte inside is refused: the text travels on as a C string, so it would
 * end there without a word. */
static char *prompt_read_file(const char *path, const char *what, st_err *err) {
    size_t len;
    char *buf = infile_read(path, what, PROMPT_MAX_FILE, &len, err);
    const char *nul = buf ? memchr(buf, 0, len) : NULL;
    if (nul) {
        st_set(err, ST_ERR_ARG, "%s '%s' has a NUL byte at offset %zu: it is not a text file",
               what, path, (size_t)(nul - buf));
        free(buf);
        return NULL;
    }
    return buf;
}

char *prompt_open_file(prompt_model *pm, const prompt_model_opts *mo, const char *path,
                       const char *what, st_err *err) {
    char *text = prompt_read_file(path, what, err);
    if (text && prompt_model_open(pm, mo, err)) {
        free(text);
        return NULL;
    }
    return text;
}

/* ---- branch output ---- */

void prompt_emit(void *ud, int32_t branch, int32_t token, float logprob) {
    (void)logprob;
    prompt_toks *v = &((prompt_toks *)ud)[branch];
    if (v->n == v->cap) {
        int32_t c = v->cap ? v->cap * 2 : 64;
        int32_t *nt = realloc(v->t, sizeof(int32_t) * (size_t)c);
        if (!nt) return; /* the token is lost from the report, not from the forest */
        v->t = nt;
        v->cap = c;
    }
    v->t[v->n++] = token;
}

void prompt_toks_free(prompt_toks *v, int32_t n) {
    for (int32_t i = 0; v && i < n; i++) free(v[i].t);
}

/* Appends the streamed text of one token (or of the flush when id < 0) to *buf. */
static bool put_text(const tok *tk, tok_stream *s, int32_t id, char **buf, size_t *len,
                     size_t *cap) {
    for (;;) {
        size_t room = *cap - *len;
        size_t got = id >= 0 ? tok_stream_put(tk, s, id, *buf + *len, room)
                             : tok_stream_flush(tk, s, *buf + *len, room);
        if (got < room) {
            *len += got;
            return true;
        }
        size_t nc = *cap * 2 + got + 1;
        char *nb = realloc(*buf, nc);
        if (!nb) return false;
        *buf = nb;
        *cap = nc;
    }
}

char *prompt_continuation(const tok *tk, const int32_t *prompt, int32_t n_prompt,
                          const int32_t *gen, int32_t n_gen) {
    tok_stream s;
    tok_stream_init(&s);
    size_t cap = 256, len = 0;
    char *buf = malloc(cap);
    if (!buf) return NULL;
    buf[0] = '\0';
    bool ok = true;
    for (int32_t i = 0; i < n_prompt && ok; i++) ok = put_text(tk, &s, prompt[i], &buf, &len, &cap);
    len = 0; /* the prompt's text is dropped; the stream keeps its state */
    for (int32_t i = 0; i < n_gen && ok; i++) ok = put_text(tk, &s, gen[i], &buf, &len, &cap);
    ok = ok && put_text(tk, &s, -1, &buf, &len, &cap);
    if (!ok) {
        free(buf);
        return NULL;
    }
    buf[len] = '\0';
    return buf;
}

void prompt_token_text(const tok *tk, int32_t prev, int32_t id, char *out, size_t cap) {
    tok_stream s;
    tok_stream_init(&s);
    /* a stream that has just seen prev decodes id as it reads in its path */
    if (prev >= 0) s.prev = prev;
    size_t got = tok_stream_put(tk, &s, id, out, cap);
    if (got >= cap) out[0] = '\0';
    /* a control token (BOS) or a byte still waiting for the rest of its character has no
     * text of its own: show its piece */
    if ((got == 0 || got >= cap) && (s.n_pend > 0 || tok_type(tk, id) == TOK_CONTROL))
        snprintf(out, cap, "%s", tok_piece(tk, id) ? tok_piece(tk, id) : "");
}

/* Writes s with its control bytes escaped (json: \uXXXX, else \xXX); quoted: between
 * double quotes, with the quote and the backslash escaped too; lines: newlines and tabs
 * kept as they are (running text). Returns the bytes written. */
static int put_escaped(FILE *f, const char *s, int max_chars, bool json, bool quoted,
                       bool lines) {
    int chars = 0, n = 0;
    if (quoted) n += fputc('"', f) != EOF;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p & 0xC0) != 0x80 && max_chars > 0 && chars++ >= max_chars) {
            n += fprintf(f, "...");
            break;
        }
        if (quoted && (*p == '"' || *p == '\\')) n += fprintf(f, "\\%c", *p);
        else if (lines && (*p == '\n' || *p == '\t')) n += fputc(*p, f) != EOF;
        else if (*p == '\n') n += fprintf(f, "\\n");
        else if (*p == '\t') n += fprintf(f, "\\t");
        else if (*p == '\r') n += fprintf(f, "\\r");
        else if (*p < 0x20 || *p == 0x7f) n += fprintf(f, json ? "\\u%04x" : "\\x%02x", *p);
        else n += fputc(*p, f) != EOF;
    }
    if (quoted) n += fputc('"', f) != EOF;
    return n;
}

void prompt_json_str(FILE *f, const char *s) { put_escaped(f, s, 0, true, true, false); }

void prompt_show_str(FILE *f, const char *s, int max_chars) {
    put_escaped(f, s, max_chars, false, true, false);
}

int prompt_show_bare(FILE *f, const char *s) { return put_escaped(f, s, 0, false, false, false); }

void prompt_put_text(FILE *f, const char *s) {
    if (isatty(fileno(f))) put_escaped(f, s, 0, false, false, true);
    else fputs(s, f);
}
