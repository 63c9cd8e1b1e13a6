/* chat.c - chat templates (see chat.h): one table of template families, a renderer
 * shared by the five "role header" families (ChatML, Llama-3, Zephyr, Gemma, Gemma 4), one for
 * Llama-2's [INST] pairs, one for harmony (gpt-oss), the detector, and the reader of ChatML
 * default system messages.
 *
 * Rendering fidelity is judged against the official Jinja templates as transformers runs
 * them; where this code differs from llama.cpp's hand-written renderers (Llama-2's spaces
 * around answers, Gemma's untrimmed system text) it follows the Jinja. */
#include "tok/chat.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/status.h"

/* ---- output: a snprintf-like buffer filler ---- */

typedef struct chat_out {
    char *buf;   /* NULL when cap is 0 */
    size_t cap;  /* bytes available, including the NUL */
    size_t len;  /* bytes of the full text so far (saturates at SIZE_MAX) */
} chat_out;

static void out_put(chat_out *o, const char *s, size_t n) {
    if (o->len < o->cap) {
        size_t room = o->cap - 1 - o->len;
        memcpy(o->buf + o->len, s, n < room ? n : room);
    }
    o->len = n > SIZE_MAX - o->len ? SIZE_MAX : o->len + n;
}

static void out_str(chat_out *o, const char *s) { out_put(o, s, strlen(s)); }

/* NUL-terminates what fits and returns the full length. */
static size_t out_end(chat_out *o) {
    if (o->cap > 0) o->buf[o->len < o->cap ? o->len : o->cap - 1] = '\0';
    return o->len;
}

/* ---- whitespace as Python's str.strip() sees it (Jinja's |trim and .strip()) ---- */

/* The characters str.isspace() accepts beyond ASCII, in UTF-8. */
static const char *const chat_uspace[] = {
    "\xc2\x85", "\xc2\xa0", "\xe1\x9a\x80", "\xe2\x80\x80", "\xe2\x80\x81", "\xe2\x80\x82",
    "\xe2\x80\x83", "\xe2\x80\x84", "\xe2\x80\x85", "\xe2\x80\x86", "\xe2\x80\x87",
    "\xe2\x80\x88", "\xe2\x80\x89", "\xe2\x80\x8a", "\xe2\x80\xa8", "\xe2\x80\xa9",
    "\xe2\x80\xaf", "\xe2\x81\x9f", "\xe3\x80\x80"};

static bool ascii_space(unsigned char c) {
    return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20);
}

/* Length of the whitespace character that s[0..n) starts with (at_end: ends with), or 0.
 * Matching whole UTF-8 sequences from the end is safe because a lead byte never
 * occurs inside a sequence. */
static size_t space_len(const char *s, size_t n, bool at_end) {
    if (n == 0) return 0;
    if (ascii_space((unsigned char)(at_end ? s[n - 1] : s[0]))) return 1;
    for (size_t i = 0; i < sizeof chat_uspace / sizeof chat_uspace[0]; i++) {
        size_t k = strlen(chat_uspace[i]);
        if (k <= n && memcmp(at_end ? s + n - k : s, chat_uspace[i], k) == 0) return k;
    }
    return 0;
}

/* Narrows (*s, *n) by the whitespace at its start (lead) and end (tail). */
static void strip(const char **s, size_t *n, bool lead, bool tail) {
    size_t k;
    while (lead && (k = space_len(*s, *n, false)) > 0) *s += k, *n -= k;
    while (tail && (k = space_len(*s, *n, true)) > 0) *n -= k;
}

/* ---- conversation view: the messages, optionally behind a default system message ---- */

typedef struct chat_conv {
    const chat_msg *lead; /* rendered before msgs when not NULL */
    const chat_msg *msgs;
    size_t n;             /* messages in msgs */
} chat_conv;

static size_t conv_n(const chat_conv *c) { return c->n + (c->lead != NULL); }

static chat_msg conv_at(const chat_conv *c, size_t i) {
    chat_msg m = c->lead ? (i == 0 ? *c->lead : c->msgs[i - 1]) : c->msgs[i];
    ASSERT(m.role != NULL);
    if (!m.content) m.content = "";
    return m;
}

static bool role_is(const chat_msg *m, const char *role) { return strcmp(m->role, role) == 0; }

/* ---- the families ---- */

typedef struct chat_style chat_style;
typedef void (*chat_render_fn)(const chat_style *st, const chat_conv *c, bool gen, chat_out *o);

/* A "role header" family: each turn is open_pre + role + open_post + content + close. */
struct chat_style {
    const char *name;
    bool includes_bos;
    chat_render_fn render;
    const char *start;      /* written first, even with no messages (Gemma's bos_token) */
    const char *first;      /* written before the first message (Llama-3's bos_token) */
    const char *open_pre, *open_post;
    const char *close;
    const char *assistant;  /* how the role "assistant" is written ("model" for Gemma) */
    bool trim;              /* content | trim */
    bool fold_system;       /* system text opens the next user turn, + "\n\n" (Gemma 3) */
    bool basic_roles;       /* only system, user and assistant are written (Zephyr) */
    bool gen_after_message; /* the generation prompt needs a message before it (Zephyr) */
    bool merge_answers;     /* an answer right after an answer opens no new turn (Gemma 4) */
    const char *late_answer; /* opens each answer after the last user turn, or NULL */
    const char *gen_suffix; /* written after the generation prompt's header, or NULL */
};

static void render_none(const chat_style *st, const chat_conv *c, bool gen, chat_out *o) {
    (void)st, (void)c, (void)gen, (void)o;
}

static void put_open(const chat_style *st, const char *role, chat_out *o) {
    out_str(o, st->open_pre);
    out_str(o, strcmp(role, "assistant") == 0 ? st->assistant : role);
    out_str(o, st->open_post);
}

/* ChatML, Llama-3, Zephyr, Gemma, Gemma 4. */
static void render_turns(const chat_style *st, const chat_conv *c, bool gen, chat_out *o) {
    size_t n = conv_n(c), since = 0; /* since: first message not yet folded */
    bool answered = false;            /* the last message written was an answer */
    size_t last_user = 0;             /* answers from here on are late_answer's */
    for (size_t i = 0; i < n; i++) {
        chat_msg m = conv_at(c, i);
        if (role_is(&m, "user")) last_user = i + 1;
    }
    out_str(o, st->start);
    if (n > 0) out_str(o, st->first);
    for (size_t i = 0; i < n; i++) {
        chat_msg m = conv_at(c, i);
        bool basic = role_is(&m, "system") || role_is(&m, "user") || role_is(&m, "assistant");
        if ((st->fold_system && role_is(&m, "system")) || (st->basic_roles && !basic)) continue;
        if (!(st->merge_answers && answered && role_is(&m, "assistant"))) put_open(st, m.role, o);
        answered = role_is(&m, "assistant");
        if (answered && st->late_answer && i >= last_user) out_str(o, st->late_answer);
        if (st->fold_system && role_is(&m, "user")) {
            for (size_t j = since; j < i; j++) {
                chat_msg s = conv_at(c, j);
                if (!role_is(&s, "system")) continue;
                out_str(o, s.content);
                out_str(o, "\n\n");
            }
            since = i + 1;
        }
        const char *t = m.content;
        size_t tn = strlen(t);
        strip(&t, &tn, st->trim, st->trim);
        out_put(o, t, tn);
        out_str(o, st->close);
    }
    if (gen && (n > 0 || !st->gen_after_message)) {
        put_open(st, "assistant", o);
        if (st->gen_suffix) out_str(o, st->gen_suffix);
    }
}

/* Llama-2: "<s>[INST] " + user + " [/INST]", " " + answer + " </s>"; the system message
 * goes into the next user turn as "<<SYS>>\n" + system + "\n<</SYS>>\n\n". The official
 * template strips the combined user content (system block included) at both ends, so the
 * user text loses only trailing space when a system block precedes it, and with an empty
 * user text the block's own "\n\n" goes too. There is no generation prompt. */
static void render_llama2(const chat_style *st, const chat_conv *c, bool gen, chat_out *o) {
    (void)st, (void)gen;
    size_t n = conv_n(c), since = 0;
    for (size_t i = 0; i < n; i++) {
        chat_msg m = conv_at(c, i);
        const char *t = m.content;
        size_t tn = strlen(t);
        if (role_is(&m, "user")) {
            size_t n_sys = 0;
            for (size_t j = since; j < i; j++) {
                chat_msg s = conv_at(c, j);
                n_sys += role_is(&s, "system");
            }
            strip(&t, &tn, n_sys == 0, true);
            out_str(o, "<s>[INST] ");
            for (size_t j = since; j < i; j++) {
                chat_msg s = conv_at(c, j);
                if (!role_is(&s, "system")) continue;
                out_str(o, "<<SYS>>\n");
                out_str(o, s.content);
                out_str(o, --n_sys > 0 || tn > 0 ? "\n<</SYS>>\n\n" : "\n<</SYS>>");
            }
            out_put(o, t, tn);
            out_str(o, " [/INST]");
            since = i + 1;
        } else if (role_is(&m, "assistant")) {
            strip(&t, &tn, true, true);
            out_str(o, " ");
            out_put(o, t, tn);
            out_str(o, " </s>");
        }
    }
}

/* Harmony (gpt-oss; models/templates/openai-gpt-oss-120b.jinja in llama.cpp 0c1e5709,
 * without tools): its system block with today's date (strftime_now, local time), a first
 * system or developer message as the developer's instructions, then user turns and final
 * answers; other roles and later system messages are dropped, as the Jinja drops them. */
static void render_harmony(const chat_style *st, const chat_conv *c, bool gen, chat_out *o) {
    (void)st;
    char date[32] = "";
    const time_t now = time(NULL);
    struct tm tm;
    if (localtime_r(&now, &tm)) strftime(date, sizeof date, "%Y-%m-%d", &tm);
    out_str(o, "<|start|>system<|message|>You are ChatGPT, a large language model trained by "
               "OpenAI.\nKnowledge cutoff: 2024-06\nCurrent date: ");
    out_str(o, date);
    out_str(o, "\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, final. "
               "Channel must be included for every message.<|end|>");
    const size_t n = conv_n(c);
    size_t i = 0;
    chat_msg m0 = n > 0 ? conv_at(c, 0) : (chat_msg){"", ""};
    if (n > 0 && (role_is(&m0, "system") || role_is(&m0, "developer"))) {
        i = 1;
        if (*m0.content) {
            out_str(o, "<|start|>developer<|message|># Instructions\n\n");
            out_str(o, m0.content);
            out_str(o, "\n\n<|end|>");
        }
    }
    for (; i < n; i++) {
        chat_msg m = conv_at(c, i);
        if (role_is(&m, "user")) {
            out_str(o, "<|start|>user<|message|>");
            out_str(o, m.content);
            out_str(o, "<|end|>");
        } else if (role_is(&m, "assistant")) {
            out_str(o, "<|start|>assistant<|channel|>final<|message|>");
            out_str(o, m.content);
            out_str(o, i + 1 == n && !gen ? "<|return|>" : "<|end|>");
        }
    }
    if (gen) out_str(o, "<|start|>assistant");
}

/* Indexed by chat_kind. */
static const chat_style chat_styles[CHAT_N_KINDS] = {
    [CHAT_NONE] = {.name = "none", .render = render_none},
    [CHAT_CHATML] = {.name = "chatml", .render = render_turns, .start = "", .first = "",
                     .open_pre = "<|im_start|>", .open_post = "\n", .close = "<|im_end|>\n",
                     .assistant = "assistant"},
    [CHAT_LLAMA3] = {.name = "llama3", .includes_bos = true, .render = render_turns,
                     .start = "", .first = "<|begin_of_text|>",
                     .open_pre = "<|start_header_id|>", .open_post = "<|end_header_id|>\n\n",
                     .close = "<|eot_id|>", .assistant = "assistant", .trim = true},
    [CHAT_LLAMA2] = {.name = "llama2", .includes_bos = true, .render = render_llama2},
    [CHAT_ZEPHYR] = {.name = "zephyr", .render = render_turns, .start = "", .first = "",
                     .open_pre = "<|", .open_post = "|>\n", .close = "</s>\n",
                     .assistant = "assistant", .basic_roles = true, .gen_after_message = true},
    [CHAT_GEMMA] = {.name = "gemma", .includes_bos = true, .render = render_turns,
                    .start = "<bos>", .first = "", .open_pre = "<start_of_turn>",
                    .open_post = "\n", .close = "<end_of_turn>\n", .assistant = "model",
                    .trim = true, .fold_system = true},
    /* models/templates/google-gemma-4-31B-it.jinja in llama.cpp 0c1e5709 */
    [CHAT_GEMMA4] = {.name = "gemma4", .includes_bos = true, .render = render_turns,
                     .start = "<bos>", .first = "", .open_pre = "<|turn>", .open_post = "\n",
                     .close = "<turn|>\n", .assistant = "model", .trim = true,
                     .merge_answers = true, .gen_suffix = "<|channel>thought\n<channel|>"},
    /* models/templates/Qwen3.5-4B.jinja in llama.cpp 0c1e5709 */
    [CHAT_QWEN35] = {.name = "qwen35", .render = render_turns, .start = "", .first = "",
                     .open_pre = "<|im_start|>", .open_post = "\n", .close = "<|im_end|>\n",
                     .assistant = "assistant", .trim = true, .gen_suffix = "<think>\n",
                     .late_answer = "<think>\n\n</think>\n\n"},
    [CHAT_HARMONY] = {.name = "harmony", .render = render_harmony},
};

static const chat_style *style_of(chat_kind k) {
    return &chat_styles[(unsigned)k < CHAT_N_KINDS ? k : CHAT_NONE];
}

const char *chat_name(chat_kind k) { return style_of(k)->name; }

bool chat_includes_bos(chat_kind k) { return style_of(k)->includes_bos; }

chat_kind chat_from_name(const char *name) {
    if (!name) return CHAT_NONE;
    for (int k = CHAT_NONE + 1; k < CHAT_N_KINDS; k++)
        if (strcmp(name, chat_styles[k].name) == 0) return (chat_kind)k;
    return CHAT_NONE;
}

size_t chat_apply_with_default(chat_kind k, const char *default_system, const chat_msg *msgs,
                               size_t n, bool add_generation_prompt, char *out, size_t cap) {
    ASSERT(n == 0 || msgs != NULL);
    ASSERT(cap == 0 || out != NULL);
    chat_msg sys = {"system", default_system};
    chat_conv c = {NULL, msgs, n};
    if (default_system && n > 0 && !(msgs[0].role && strcmp(msgs[0].role, "system") == 0))
        c.lead = &sys;
    chat_out o = {out, cap, 0};
    const chat_style *st = style_of(k);
    st->render(st, &c, add_generation_prompt, &o);
    return out_end(&o);
}

size_t chat_apply(chat_kind k, const chat_msg *msgs, size_t n, bool add_generation_prompt,
                  char *out, size_t cap) {
    return chat_apply_with_default(k, NULL, msgs, n, add_generation_prompt, out, cap);
}

size_t chat_user_turn(chat_kind k, const char *default_system, const char *user, bool first,
                      char *out, size_t cap) {
    chat_out o = {out, cap, 0};
    if (!user) user = "";
    if ((int)k <= CHAT_NONE || k >= CHAT_N_KINDS) {
        out_str(&o, user);
        return out_end(&o);
    }
    chat_msg um = {"user", user};
    if (first) return chat_apply_with_default(k, default_system, &um, 1, true, out, cap);
    /* a conversation whose answer is one marker byte: what follows the marker is the
     * close of that answer, the user turn and the generation prompt (the marker is not
     * whitespace, so trimming templates keep it; it comes before user's text, so a
     * marker byte inside user does not matter) */
    chat_msg msgs[3] = {{"user", "x"}, {"assistant", "\x01"}, {"user", user}};
    size_t need = chat_apply(k, msgs, 3, true, NULL, 0);
    char *full = malloc(need + 1);
    if (full) {
        chat_apply(k, msgs, 3, true, full, need + 1);
        const char *mark = strchr(full, '\x01');
        if (mark) out_str(&o, mark + 1);
        free(full);
    }
    return out_end(&o);
}

/* ---- detection ---- */

static bool has(const char *s, const char *marker) { return strstr(s, marker) != NULL; }

chat_kind chat_detect(const char *j) {
    if (!j) return CHAT_NONE;
    chat_kind named = chat_from_name(j);
    if (named != CHAT_NONE) return named;
    /* Phi-4 puts <|im_sep|> after the role; SmolVLM uses <|im_start|> only as BOS. */
    if (has(j, "<|im_start|>")) {
        if (has(j, "<|im_sep|>") || has(j, "<end_of_utterance>")) return CHAT_NONE;
        return has(j, "<|vision_start|>") && has(j, "enable_thinking") ? CHAT_QWEN35 : CHAT_CHATML;
    }
    if (has(j, "<|start_header_id|>") && has(j, "<|end_header_id|>")) return CHAT_LLAMA3;
    if (has(j, "<start_of_turn>")) return CHAT_GEMMA;
    if (has(j, "<|turn>") && has(j, "<turn|>")) return CHAT_GEMMA4;
    if (has(j, "<|start|>") && has(j, "<|channel|>")) return CHAT_HARMONY;
    /* Mistral's [INST] templates have no <<SYS>> block and space answers differently. */
    if (has(j, "[INST]") && has(j, "<<SYS>>")) return CHAT_LLAMA2;
    /* Phi-3 closes turns with <|end|>; ChatGLM and GLM-Edge write no eos_token. */
    if (has(j, "<|user|>") && has(j, "<|assistant|>") && has(j, "eos_token") && !has(j, "<|end|>"))
        return CHAT_ZEPHYR;
    return CHAT_NONE;
}

/* ---- default system message ---- */

/* Decodes the Jinja string literal text from s up to "<|im_end|>" into o; false when the
 * text is not a plain literal (a quote, an expression, an unknown escape, no end). */
static bool read_literal(const char *s, chat_out *o) {
    static const char end[] = "<|im_end|>";
    for (;;) {
        if (strncmp(s, end, sizeof end - 1) == 0) return o->len > 0;
        char ch = *s++;
        if (ch == '\0' || ch == '\'' || ch == '"' || ch == '{' || ch == '}') return false;
        if (ch == '\\') {
            switch (*s++) {
            case 'n': ch = '\n'; break;
            case 't': ch = '\t'; break;
            case '\'': ch = '\''; break;
            case '"': ch = '"'; break;
            case '\\': ch = '\\'; break;
            default: return false;
            }
        }
        out_put(o, &ch, 1);
    }
}

size_t chat_default_system(const char *jinja, char *out, size_t cap) {
    ASSERT(cap == 0 || out != NULL);
    static const char head[] = "<|im_start|>system";
    chat_out o = {out, cap, 0};
    for (const char *p = jinja; p && (p = strstr(p, head)) != NULL; p += sizeof head - 1) {
        const char *s = p + sizeof head - 1;
        /* the newline after the role: a real one, or the escape \n inside the literal */
        if (*s == '\n') s += 1;
        else if (s[0] == '\\' && s[1] == 'n') s += 2;
        else continue;
        if (read_literal(s, &o)) return out_end(&o);
        o.len = 0;
    }
    return out_end(&o);
}

/* ---- reasoning (Qwen3's <think>) ---- */

bool chat_has_think_switch(const char *jinja) {
    return jinja && has(jinja, "enable_thinking") && has(jinja, "<think>");
}

const char *chat_think_off_text(chat_kind k) {
    return k == CHAT_QWEN35 ? "\n</think>\n\n" : "<think>\n\n</think>\n\n";
}

const char *chat_think_close(const char *text, size_t *mark_len) {
    static const char *const marks[] = {"</think>", "<|channel|>final<|message|>"};
    const char *at = NULL;
    size_t len = 0;
    for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++)
        for (const char *p = text; (p = strstr(p, marks[i])) != NULL; p += strlen(marks[i]))
            if (!at || p + strlen(marks[i]) > at + len) at = p, len = strlen(marks[i]);
    if (mark_len) *mark_len = len;
    return at;
}

const char *chat_after_think(const char *text) {
    size_t len;
    const char *at = chat_think_close(text, &len);
    return at ? at + len : text;
}
