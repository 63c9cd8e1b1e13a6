/* ask_margins.c - :ask's chat turn and the :margins strategy for the worker (see
 * ask_margins.h). */
#include "ask_margins.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- :ask ---- */

static bool is_control(const tok *tk, int32_t id) {
    int32_t ty = tok_type(tk, id);
    return (ty == TOK_CONTROL || ty == TOK_USER) && id != tok_bos(tk);
}

int ui_turn_form(const tok *tk, chat_kind kind, const int32_t *path, int32_t n) {
    if (kind == CHAT_NONE) return UI_TURN_RAW;
    if (n <= 0) return UI_TURN_FIRST;
    for (int32_t i = 0; i < n; i++)
        if (is_control(tk, path[i])) return UI_TURN_FOLLOW;
    return UI_TURN_OPEN;
}

const char *ui_turn_form_name(int form, chat_kind kind, char *buf, size_t cap) {
    static const char *const what[] = {
        "raw text (the model has no chat template)",
        "user turn + assistant header",
        "user turn + assistant header after the text",
        "the answer closed, user turn + assistant header",
    };
    if (form == UI_TURN_RAW) snprintf(buf, cap, "%s", what[0]);
    else snprintf(buf, cap, "%s %s", chat_name(kind), what[form >= 0 && form < 4 ? form : 1]);
    return buf;
}

char *ui_turn_text(const ui_chat *ch, const char *text, int form) {
    if (form == UI_TURN_RAW || ch->kind == CHAT_NONE) return strdup(text);
    bool first = form != UI_TURN_FOLLOW;
    const char *sys = first ? ch->system : NULL;
    size_t need = chat_user_turn(ch->kind, sys, text, first, NULL, 0);
    char *s = malloc(need + 1);
    if (s && chat_user_turn(ch->kind, sys, text, first, s, need + 1) != need) {
        free(s); /* out of memory inside chat_user_turn */
        s = NULL;
    }
    return s;
}

int32_t *ui_turn_tokens(const tok *tk, const ui_chat *ch, const char *text, int form, bool root,
                        int32_t *n, st_err *err) {
    if (ch->kind == CHAT_NONE) form = UI_TURN_RAW;
    char *s = ui_turn_text(ch, text, form);
    if (!s) {
        st_set(err, ST_ERR_NOMEM, "out of memory");
        return NULL;
    }
    bool special = form != UI_TURN_RAW;
    bool bos = form == UI_TURN_RAW ? root && tok_add_bos(tk)
               : form == UI_TURN_FIRST ? tok_add_bos(tk) && !chat_includes_bos(ch->kind)
                                       : false;
    int32_t need = 0;
    int32_t *t = tok_encode_alloc(tk, s, strlen(s), bos, special, &need, err);
    free(s);
    if (t && need <= 0) {
        free(t);
        st_set(err, ST_ERR_ARG, "nothing to append");
        return NULL;
    }
    if (!t) return NULL;
    /* a template that writes BOS itself writes it here too: not in mid-sequence (ChatML's
     * <|im_start|> opens its turn even where it is also the BOS token, as in SmolLM2) */
    if (form == UI_TURN_OPEN && chat_includes_bos(ch->kind) && t[0] == tok_bos(tk)) {
        if (need == 1) {
            free(t);
            st_set(err, ST_ERR_ARG, "nothing to append");
            return NULL;
        }
        memmove(t, t + 1, sizeof(int32_t) * (size_t)(need - 1));
        need--;
    }
    *n = need;
    return t;
}

/* ---- :margins ---- */

/* The tokens of a request text in the notes' form. */
static int32_t *request_tokens(const tok *tk, const ui_chat *ch, const char *text, int32_t *n,
                               st_err *err) {
    return ui_turn_tokens(tk, ch, text, ch->kind == CHAT_NONE ? UI_TURN_RAW : UI_TURN_FIRST, true, n, err);
}

/* The answer prompt's tokens, once every note is done (strategy_answer_fn). */
static int32_t *answer_tokens(void *ud, const char *notes, int32_t *n, st_err *err) {
    const ui_margins *um = ud;
    char *text = margins_answer_prompt(um->question, notes, um->chat.kind != CHAT_NONE);
    if (!text) {
        st_set(err, ST_ERR_NOMEM, "out of memory");
        return NULL;
    }
    int32_t *t = request_tokens(um->tk, &um->chat, text, n, err);
    free(text);
    return t;
}

ui_margins *ui_margins_start(forest *f, const tok *tk, forest_id from, const char *question,
                             int32_t chunk, const ui_chat *ch, const sample_params *sp,
                             int32_t budget, int32_t n_vocab, st_err *err) {
    if (chunk <= 0) chunk = UI_MARGINS_CHUNK;
    int32_t n_path = forest_get(f, from) ? forest_path(f, from, NULL, 0) : -1;
    if (n_path < 0) {
        st_set(err, ST_ERR_ARG, "margins: select the branch whose text the notes are about");
        return NULL;
    }
    ui_margins *um = calloc(1, sizeof *um);
    int32_t *path = malloc(sizeof(int32_t) * (size_t)(n_path + 1));
    int32_t *ptok[MARGINS_MAX_CHUNKS] = {0}, plen[MARGINS_MAX_CHUNKS] = {0}, n_ch = 0;
    if (!um || !path || !(um->question = strdup(question))) {
        st_set(err, ST_ERR_NOMEM, "out of memory");
        goto fail;
    }
    forest_path(f, from, path, n_path);
    const int32_t *ctx = path;
    int32_t n_ctx = n_path;
    if (n_ctx > 0 && ctx[0] == tok_bos(tk)) ctx++, n_ctx--;
    if (n_ctx == 0) {
        st_set(err, ST_ERR_ARG, "margins: the selected branch has no text to take notes on");
        goto fail;
    }
    n_ch = (n_ctx + chunk - 1) / chunk;
    if (n_ch > MARGINS_MAX_CHUNKS) {
        st_set(err, ST_ERR_ARG, "margins: %d chunks of %d tokens, at most %d (give a larger CHUNK)", n_ch,
               chunk, MARGINS_MAX_CHUNKS);
        n_ch = 0;
        goto fail;
    }
    for (int32_t i = 0; i < n_ch; i++) {
        char *text = margins_chunk_prompt(tk, ctx, n_ctx, chunk, i, question, ch->kind != CHAT_NONE);
        ptok[i] = text ? request_tokens(tk, ch, text, &plen[i], err) : NULL;
        if (!text) st_set(err, ST_ERR_NOMEM, "out of memory");
        free(text);
        if (!ptok[i]) goto fail;
    }
    /* the KV slots the prompts take (their common prefix once), checked before they are
     * added so that a refusal leaves the forest as it was */
    int32_t lcp = plen[0], need = 0;
    for (int32_t i = 1; i < n_ch; i++) {
        int32_t j = 0;
        while (j < lcp && j < plen[i] && ptok[i][j] == ptok[0][j]) j++;
        lcp = j;
    }
    for (int32_t i = 0; i < n_ch; i++) need += plen[i] - lcp;
    need += lcp;
    const kv_alloc *kv = forest_kv_const(f);
    int32_t free_slots = kv_alloc_n_slots(kv) - kv_alloc_used(kv) - forest_n_pending(f);
    if (need > free_slots) {
        st_set(err, ST_ERR_CONTEXT, "margins: the %d note prompts need %d KV slots, %d are free "
               "(prune something first)", n_ch, need, free_slots > 0 ? free_slots : 0);
        goto fail;
    }
    um->chat = *ch;
    um->tk = tk;
    um->n_chunks = n_ch;
    strategy_opts o = strategy_opts_for(strategy_find("margins"));
    o.sample = *sp;
    o.budget = budget;
    o.n_vocab = n_vocab;
    o.u.margins.prompts = (const int32_t *const *)ptok;
    o.u.margins.lens = plen;
    o.u.margins.n_chunks = n_ch;
    o.u.margins.answer_budget = budget;
    o.u.margins.answer = answer_tokens;
    o.u.margins.answer_ud = um;
    strategy_env env = {.f = f, .tk = tk};
    if (!(um->s = strategy_create(&o, &env, err))) goto fail;
    for (int32_t i = 0; i < n_ch; i++) free(ptok[i]);
    free(path);
    return um;
fail:
    for (int32_t i = 0; i < n_ch; i++) free(ptok[i]);
    free(path);
    if (um) free(um->question);
    free(um);
    return NULL;
}

void ui_margins_free(ui_margins *um) {
    if (!um) return;
    strategy_free(um->s);
    free(um->question);
    free(um);
}
