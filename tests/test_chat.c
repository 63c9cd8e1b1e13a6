/* test_chat.c - tests of the chat templates (engine/tok/chat.h): each family rendered for a
 * system + user + assistant + user conversation against the output of the official Jinja
 * template; edge cases of the templates (empty conversations, trimming, folding, dropped
 * roles); detection from the real tokenizer.chat_template texts of five models and from
 * look-alikes that must not match; names; buffer-filler semantics; SmolLM2's default
 * system message; and, when models/SmolLM2-135M-Instruct.Q4_1.gguf is present (sh
 * tools/fetch-model.sh), detection from that file's metadata.
 *
 * Where the expected strings come from: the five J_* template texts below are the
 * chat_template values of the models' tokenizer_config.json files (JSON-decoded; the
 * SmolLM2 one is byte-identical to tokenizer.chat_template in the pinned GGUF, which the
 * model test checks). Each expected string was produced by rendering that exact text with
 * jinja2 3.1.6 under transformers' settings (ImmutableSandboxedEnvironment, trim_blocks,
 * lstrip_blocks) with the conversation given next to it, bos_token/eos_token as in the
 * model ("<|begin_of_text|>" for Llama-3, "<s>"/"</s>" for Llama-2 and Zephyr, "<bos>" for
 * Gemma). Gemma 1/2 raise "System role not supported"; the Gemma expectations with a
 * system message are what Gemma 3's official template does (system text + "\n\n" before
 * the first user turn's content), produced by rendering the gemma-2b-it template with the
 * system text so folded by hand. */
#include "tok/chat.h"
#include "gguf/gguf.h"
#include "t.h"
#include "t_run.h"

#include <stdint.h>
#include <time.h>

/* ---- the official templates (sources: HF tokenizer_config.json "chat_template") ---- */

/* HuggingFaceTB/SmolLM2-135M-Instruct (also in the GGUF's tokenizer.chat_template). */
static const char J_SMOLLM2[] =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}";

/* meta-llama/Meta-Llama-3-8B-Instruct. */
static const char J_LLAMA3[] =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | "
    "trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}"
    "{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";

/* meta-llama/Llama-2-7b-chat-hf (its literals hold the Jinja escape \n, not a newline). */
static const char J_LLAMA2[] =
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set "
    "system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}"
    "{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if "
    "(message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation "
    "roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 "
    "== 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
    "'\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] "
    "%}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + "
    "content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + "
    "content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}";

/* HuggingFaceH4/zephyr-7b-beta (the newlines between tags are in the original). */
static const char J_ZEPHYR[] =
    "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + "
    "message['content'] + eos_token }}\n{% elif message['role'] == 'system' %}\n{{ "
    "'<|system|>\n' + message['content'] + eos_token }}\n{% elif message['role'] == "
    "'assistant' %}\n{{ '<|assistant|>\n'  + message['content'] + eos_token }}\n{% endif %}\n"
    "{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n"
    "{% endfor %}";

/* google/gemma-2b-it. */
static const char J_GEMMA[] =
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role "
    "not supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == "
    "'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must "
    "alternate user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == "
    "'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}"
    "{% endif %}{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + "
    "'<end_of_turn>\\n' }}{% endfor %}{% if add_generation_prompt %}"
    "{{'<start_of_turn>model\\n'}}{% endif %}";

/* Look-alikes that must not be taken for one of ours (from llama.cpp's
 * tests/test-chat-template.cpp data): Mistral-7B-Instruct-v0.2 ([INST] without <<SYS>>,
 * answers not spaced), Phi-3-small (<|user|> with <|end|>). */
static const char J_MISTRAL[] =
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != "
    "(loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
    "user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ "
    "'[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
    "{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant "
    "roles are supported!') }}{% endif %}{% endfor %}";
static const char J_PHI3[] =
    "{{ bos_token }}{% for message in messages %}{{'<|' + message['role'] + '|>' + '\n' + "
    "message['content'] + '<|end|>\n' }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}";

static const char SMOLLM2_SYSTEM[] =
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face";

/* ---- helpers ---- */

/* Renders into a fresh string (sized by a first call) and checks the two calls agree. */
static char *render(chat_kind k, const char *dflt, const chat_msg *m, size_t n, bool gen) {
    size_t need = chat_apply_with_default(k, dflt, m, n, gen, NULL, 0);
    char *s = malloc(need + 1);
    size_t got = chat_apply_with_default(k, dflt, m, n, gen, s, need + 1);
    T_CHECK(got == need, "%s: size changed between calls: %zu vs %zu", chat_name(k), got, need);
    return s;
}

static void check_render(const char *what, chat_kind k, const char *dflt, const chat_msg *m,
                         size_t n, bool gen, const char *want) {
    char *s = render(k, dflt, m, n, gen);
    T_CHECK(strcmp(s, want) == 0, "%s (%s):\n got: [%s]\nwant: [%s]", what, chat_name(k), s, want);
    free(s);
}

/* The conversation every family is rendered for: system, user, assistant, user. Its
 * spaces exercise trimming (Llama-3, Gemma |trim; Llama-2 .strip()). */
static const chat_msg CONV[] = {
    {"system", "You are terse."},
    {"user", "Hi there"},
    {"assistant", " Hello! How can I help? "},
    {"user", "  What is 2+2?\n"},
};
#define N_CONV (sizeof CONV / sizeof CONV[0])

/* ---- tests ---- */

static void test_families(void) {
    /* jinja2: J_SMOLLM2, messages = CONV, add_generation_prompt = true */
    check_render("chatml conversation", CHAT_CHATML, NULL, CONV, N_CONV, true,
                 "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi there"
                 "<|im_end|>\n<|im_start|>assistant\n Hello! How can I help? <|im_end|>\n"
                 "<|im_start|>user\n  What is 2+2?\n<|im_end|>\n<|im_start|>assistant\n");
    /* jinja2: J_LLAMA3, bos_token "<|begin_of_text|>" */
    check_render("llama3 conversation", CHAT_LLAMA3, NULL, CONV, N_CONV, true,
                 "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are terse."
                 "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
                 "<|start_header_id|>assistant<|end_header_id|>\n\nHello! How can I help?"
                 "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>"
                 "<|start_header_id|>assistant<|end_header_id|>\n\n");
    /* jinja2: J_LLAMA2, bos "<s>", eos "</s>" (no generation prompt in the template) */
    check_render("llama2 conversation", CHAT_LLAMA2, NULL, CONV, N_CONV, true,
                 "<s>[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHi there [/INST] Hello! How "
                 "can I help? </s><s>[INST] What is 2+2? [/INST]");
    /* jinja2: J_ZEPHYR, eos "</s>" */
    check_render("zephyr conversation", CHAT_ZEPHYR, NULL, CONV, N_CONV, true,
                 "<|system|>\nYou are terse.</s>\n<|user|>\nHi there</s>\n<|assistant|>\n Hello! "
                 "How can I help? </s>\n<|user|>\n  What is 2+2?\n</s>\n<|assistant|>\n");
    /* jinja2: J_GEMMA, bos "<bos>", with the system folded as Gemma 3 does (see top) */
    check_render("gemma conversation", CHAT_GEMMA, NULL, CONV, N_CONV, true,
                 "<bos><start_of_turn>user\nYou are terse.\n\nHi there<end_of_turn>\n"
                 "<start_of_turn>model\nHello! How can I help?<end_of_turn>\n<start_of_turn>user"
                 "\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n");

    /* Without the generation prompt (jinja2, add_generation_prompt = false; for ChatML
     * J_SMOLLM2's output less the default system turn it inserts, which is tested below). */
    check_render("chatml no prompt", CHAT_CHATML, NULL, CONV + 1, 1, false,
                 "<|im_start|>user\nHi there<|im_end|>\n");
    check_render("llama3 no prompt", CHAT_LLAMA3, NULL, CONV + 1, 1, false,
                 "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>");
    check_render("zephyr no prompt", CHAT_ZEPHYR, NULL, CONV + 1, 1, false,
                 "<|user|>\nHi there</s>\n");
    check_render("gemma no prompt", CHAT_GEMMA, NULL, CONV + 1, 1, false,
                 "<bos><start_of_turn>user\nHi there<end_of_turn>\n");
    char *a = render(CHAT_LLAMA2, NULL, CONV, N_CONV, true);
    char *b = render(CHAT_LLAMA2, NULL, CONV, N_CONV, false);
    T_CHECK(strcmp(a, b) == 0, "llama2 has no generation prompt: [%s] vs [%s]", a, b);
    free(a);
    free(b);
    /* Without a system message (jinja2; Gemma 1/2 accept this conversation as it is). */
    check_render("gemma without system", CHAT_GEMMA, NULL, CONV + 1, N_CONV - 1, true,
                 "<bos><start_of_turn>user\nHi there<end_of_turn>\n<start_of_turn>model\nHello! "
                 "How can I help?<end_of_turn>\n<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n"
                 "<start_of_turn>model\n");
    /* jinja2 3.1.6 (trim_blocks, lstrip_blocks) on llama.cpp's models/templates/
     * google-gemma-4-31B-it.jinja (bos_token "<bos>": the system turn of its own, the empty
     * thought channel after the generation prompt, answers in a row sharing one model turn)
     * and Qwen3.5-4B.jinja (trimmed content, <think> opened, late answers' empty block) */
    static const chat_msg twice[] = {{"user", "q"}, {"assistant", "a"}, {"assistant", "b"}};
    static const chat_msg q_sys[] = {{"system", "  S  "}, {"user", " q "}};
    static const chat_msg q_late[] = {{"user", "q"}, {"assistant", " a "}};
    static const struct {
        const char *what;
        chat_kind k;
        const chat_msg *m;
        size_t n;
        bool gen;
        const char *want;
    } g4[] = {
        {"gemma4 conversation", CHAT_GEMMA4, CONV, N_CONV, true,
         "<bos><|turn>system\nYou are terse.<turn|>\n<|turn>user\nHi there<turn|>\n<|turn>model\n"
         "Hello! How can I help?<turn|>\n<|turn>user\nWhat is 2+2?<turn|>\n<|turn>model\n"
         "<|channel>thought\n<channel|>"},
        {"gemma4 no prompt", CHAT_GEMMA4, CONV + 1, 1, false, "<bos><|turn>user\nHi there<turn|>\n"},
        {"qwen35 system", CHAT_QWEN35, q_sys, 2, true,
         "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n"
         "<think>\n"},
        {"qwen35 late answer", CHAT_QWEN35, q_late, 2, false,
         "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\na"
         "<|im_end|>\n"},
        {"gemma4 answers in a row", CHAT_GEMMA4, twice, 3, true,
         "<bos><|turn>user\nq<turn|>\n<|turn>model\na<turn|>\nb<turn|>\n<|turn>model\n"
         "<|channel>thought\n<channel|>"},
    };
    for (size_t i = 0; i < sizeof g4 / sizeof g4[0]; i++)
        check_render(g4[i].what, g4[i].k, NULL, g4[i].m, g4[i].n, g4[i].gen, g4[i].want);
    check_render("llama2 without system", CHAT_LLAMA2, NULL, CONV + 1, N_CONV - 1, false,
                 "<s>[INST] Hi there [/INST] Hello! How can I help? </s><s>[INST] What is 2+2? "
                 "[/INST]");
}

static void test_edges(void) {
    /* No messages (messages = [], add_generation_prompt = true): jinja2's output for
     * ChatML (SmolLM2's default system is written only inside its loop), Llama-3 (BOS only
     * inside the loop) and Zephyr (prompt only on loop.last); Llama-2's and Gemma's Jinja
     * fail on messages[0], and here give their text outside the loop. */
    check_render("chatml empty", CHAT_CHATML, SMOLLM2_SYSTEM, NULL, 0, true, "<|im_start|>assistant\n");
    check_render("llama3 empty", CHAT_LLAMA3, NULL, NULL, 0, true,
                 "<|start_header_id|>assistant<|end_header_id|>\n\n");
    check_render("llama2 empty", CHAT_LLAMA2, NULL, NULL, 0, true, "");
    check_render("zephyr empty", CHAT_ZEPHYR, NULL, NULL, 0, true, "");
    check_render("gemma empty", CHAT_GEMMA, NULL, NULL, 0, true, "<bos><start_of_turn>model\n");
    check_render("none", CHAT_NONE, NULL, CONV, N_CONV, true, "");
    check_render("out of range", (chat_kind)99, NULL, CONV, N_CONV, true, "");

    /* Llama-2 strips the combined "<<SYS>>...<</SYS>>\n\n" + user text (jinja2): the user
     * text keeps its leading space after a system block, and an empty one takes the
     * block's "\n\n" with it. */
    const chat_msg l2a[] = {{"system", " S "}, {"user", "  hi  "}};
    check_render("llama2 strip with system", CHAT_LLAMA2, NULL, l2a, 2, true,
                 "<s>[INST] <<SYS>>\n S \n<</SYS>>\n\n  hi [/INST]");
    const chat_msg l2b[] = {{"system", "S"}, {"user", " \n"}};
    check_render("llama2 empty user", CHAT_LLAMA2, NULL, l2b, 2, true,
                 "<s>[INST] <<SYS>>\nS\n<</SYS>> [/INST]");

    /* |trim is Python's str.strip(): Unicode spaces go too (jinja2, J_LLAMA3). */
    const chat_msg u[] = {{"user", "\xc2\xa0\xe3\x80\x80hi\xe2\x80\x89\x1f"}};
    check_render("llama3 unicode trim", CHAT_LLAMA3, NULL, u, 1, false,
                 "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>");

    /* Other roles: passed through by ChatML and Gemma, dropped by Zephyr and Llama-2; the
     * Zephyr prompt still follows, as its loop.last test does (jinja2; ChatML as above,
     * less SmolLM2's default system turn). */
    const chat_msg tool[] = {{"user", "a"}, {"tool", "b"}};
    check_render("chatml tool", CHAT_CHATML, NULL, tool, 2, true,
                 "<|im_start|>user\na<|im_end|>\n<|im_start|>tool\nb<|im_end|>\n"
                 "<|im_start|>assistant\n");
    check_render("zephyr tool", CHAT_ZEPHYR, NULL, tool, 2, true, "<|user|>\na</s>\n<|assistant|>\n");
    check_render("llama2 tool", CHAT_LLAMA2, NULL, tool, 2, true, "<s>[INST] a [/INST]");
    check_render("gemma tool", CHAT_GEMMA, NULL, tool, 2, false,
                 "<bos><start_of_turn>user\na<end_of_turn>\n<start_of_turn>tool\nb<end_of_turn>\n");

    /* NULL content is "". */
    const chat_msg nul[] = {{"user", NULL}};
    check_render("null content", CHAT_CHATML, NULL, nul, 1, false, "<|im_start|>user\n<|im_end|>\n");
}

static void test_default_system(void) {
    char buf[256];
    size_t n = chat_default_system(J_SMOLLM2, buf, sizeof buf);
    T_CHECK(n == strlen(SMOLLM2_SYSTEM) && strcmp(buf, SMOLLM2_SYSTEM) == 0,
            "SmolLM2 default system: %zu [%s]", n, buf);
    /* jinja2: J_SMOLLM2 with messages = CONV[1..3], add_generation_prompt = true */
    check_render("smollm2 default system", CHAT_CHATML, buf, CONV + 1, N_CONV - 1, true,
                 "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by "
                 "Hugging Face<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n"
                 "<|im_start|>assistant\n Hello! How can I help? <|im_end|>\n<|im_start|>user\n"
                 "  What is 2+2?\n<|im_end|>\n<|im_start|>assistant\n");
    /* a system message of the caller's replaces it (jinja2: same as without a default) */
    char *a = render(CHAT_CHATML, buf, CONV, N_CONV, true);
    char *b = render(CHAT_CHATML, NULL, CONV, N_CONV, true);
    T_CHECK(strcmp(a, b) == 0, "the default system must not be added: [%s]", a);
    free(a);
    free(b);

    /* Templates without one, and literals that are expressions, give nothing. */
    const char *none[] = {J_LLAMA3, J_LLAMA2, J_ZEPHYR, J_GEMMA, J_MISTRAL, "", NULL,
                          "'<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>'",
                          "'<|im_start|>system\\n{{ x }}<|im_end|>'",
                          "'<|im_start|>system\\nunterminated"};
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) {
        memset(buf, 'x', sizeof buf);
        n = chat_default_system(none[i], buf, sizeof buf);
        T_CHECK(n == 0 && buf[0] == '\0', "case %zu: no default expected, got %zu [%s]", i, n, buf);
    }
    /* A fragment written in the style of Qwen2.5's template (the \n is a Jinja escape,
     * and an expression literal comes first): escapes are decoded. */
    n = chat_default_system("{{- '<|im_start|>system\\n' + messages[0]['content'] }}{%- else %}"
                            "{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. "
                            "It\\'s \\\"fine\\\".<|im_end|>\\n' }}", buf, sizeof buf);
    T_CHECK(strcmp(buf, "You are Qwen, created by Alibaba Cloud. It's \"fine\".") == 0 &&
                n == strlen(buf), "qwen-style default: %zu [%s]", n, buf);
    /* buffer filler: the size without a buffer, cut short with a small one */
    T_CHECK(chat_default_system(J_SMOLLM2, NULL, 0) == strlen(SMOLLM2_SYSTEM), "size query");
    char small[6];
    n = chat_default_system(J_SMOLLM2, small, sizeof small);
    T_CHECK(n == strlen(SMOLLM2_SYSTEM) && strcmp(small, "You a") == 0, "cut: %zu [%s]", n, small);
}

static void test_detect(void) {
    static const struct { const char *text; chat_kind want; const char *what; } cases[] = {
        {J_SMOLLM2, CHAT_CHATML, "SmolLM2"},
        {J_LLAMA3, CHAT_LLAMA3, "Llama-3"},
        {J_LLAMA2, CHAT_LLAMA2, "Llama-2"},
        {J_ZEPHYR, CHAT_ZEPHYR, "Zephyr"},
        {J_GEMMA, CHAT_GEMMA, "Gemma"},
        {"{{- '<|turn>' + role + '\\n' }}{{- '<turn|>\\n' -}}", CHAT_GEMMA4, "Gemma 4"},
        {"<|im_start|>{% if enable_thinking is false %}<|vision_start|>", CHAT_QWEN35, "Qwen3.5"},
        {J_MISTRAL, CHAT_NONE, "Mistral v0.2"},
        {J_PHI3, CHAT_NONE, "Phi-3"},
        {"{% for m in messages %}<|im_start|>{{ m.role }}<|im_sep|>{% endfor %}", CHAT_NONE, "Phi-4"},
        {"{{ messages }}", CHAT_NONE, "plain"},
        {"", CHAT_NONE, "empty"},
        {"gemma", CHAT_GEMMA, "a name"},
        {"llama3", CHAT_LLAMA3, "a name"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        chat_kind k = chat_detect(cases[i].text);
        T_CHECK(k == cases[i].want, "detect %s: got %s, want %s", cases[i].what, chat_name(k),
                chat_name(cases[i].want));
    }
    T_CHECK(chat_detect(NULL) == CHAT_NONE, "NULL");
}

static void test_names(void) {
    static const char *const names[] = {"none", "chatml", "llama3", "llama2", "zephyr", "gemma",
                                        "gemma4", "qwen35", "harmony"};
    static const bool bos[] = {false, false, true, true, false, true, true, false, false};
    T_CHECK(sizeof names / sizeof names[0] == CHAT_N_KINDS, "one name per kind");
    for (int k = 0; k < CHAT_N_KINDS; k++) {
        T_CHECK(strcmp(chat_name((chat_kind)k), names[k]) == 0, "name of %d: %s", k, chat_name((chat_kind)k));
        T_CHECK(chat_includes_bos((chat_kind)k) == bos[k], "includes_bos of %s", names[k]);
        T_CHECK(chat_from_name(names[k]) == (chat_kind)k, "from_name(%s)", names[k]);
    }
    T_CHECK(chat_from_name("ChatML") == CHAT_NONE && chat_from_name("llama") == CHAT_NONE &&
                chat_from_name("") == CHAT_NONE && chat_from_name(NULL) == CHAT_NONE,
            "unknown names");
    T_CHECK(strcmp(chat_name((chat_kind)-1), "none") == 0 && strcmp(chat_name(CHAT_N_KINDS), "none") == 0,
            "out of range names");
    /* The BOS a template includes is really at the start of its text. */
    static const char *const bos_text[] = {"", "", "<|begin_of_text|>", "<s>", "", "<bos>",
                                           "<bos>", "", ""};
    for (int k = CHAT_NONE + 1; k < CHAT_N_KINDS; k++) {
        if (!bos[k]) continue;
        char *s = render((chat_kind)k, NULL, CONV, N_CONV, true);
        T_CHECK(strncmp(s, bos_text[k], strlen(bos_text[k])) == 0, "%s starts with its BOS: %s",
                names[k], s);
        free(s);
    }
}

static void test_buffer(void) {
    for (int k = CHAT_NONE + 1; k < CHAT_N_KINDS; k++) {
        size_t need = chat_apply((chat_kind)k, CONV, N_CONV, true, NULL, 0);
        char *full = render((chat_kind)k, NULL, CONV, N_CONV, true);
        T_CHECK(need == strlen(full) && need > 0, "%s: size %zu vs %zu", chat_name((chat_kind)k),
                need, strlen(full));
        /* every capacity: the return value is the same, the text is a NUL-terminated
         * prefix of cap - 1 bytes, and nothing past cap is written */
        char *buf = malloc(need + 8);
        bool ok = true;
        for (size_t cap = 1; ok && cap <= need + 2; cap++) {
            memset(buf, '#', need + 8);
            size_t got = chat_apply((chat_kind)k, CONV, N_CONV, true, buf, cap);
            size_t keep = cap - 1 < need ? cap - 1 : need;
            ok = got == need && memcmp(buf, full, keep) == 0 && buf[keep] == '\0';
            for (size_t i = cap; i < need + 8; i++) ok = ok && buf[i] == '#';
            if (!ok)
                fprintf(stderr, "%s: cap %zu: got %zu, text [%.*s]\n", chat_name((chat_kind)k), cap, got,
                        (int)keep, buf);
        }
        T_CHECK(ok, "%s: a capacity of 1..%zu bytes returns %zu and writes only its prefix",
                chat_name((chat_kind)k), need + 2, need);
        free(buf);
        free(full);
    }
    char one[1] = {'x'};
    T_CHECK(chat_apply(CHAT_NONE, CONV, N_CONV, true, one, 1) == 0 && one[0] == '\0', "none writes \"\"");
}

static void test_model(void) {
    const char *path = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
    if (access(path, R_OK) != 0) {
        T_MISSING("%s absent (sh tools/fetch-model.sh fetches it)", path);
        return;
    }
    st_err err = {0};
    gguf_ctx *g = gguf_open(path, &err);
    T_CHECK(g != NULL, "open %s: %s", path, err.msg);
    if (!g) return;
    const char *j = NULL;
    T_CHECK(gguf_get_str(g, "tokenizer.chat_template", &j, &err) == ST_OK, "%s", err.msg);
    if (j) {
        T_CHECK(chat_detect(j) == CHAT_CHATML, "SmolLM2 GGUF: detected %s", chat_name(chat_detect(j)));
        T_CHECK(strcmp(j, J_SMOLLM2) == 0, "the GGUF's template differs from the embedded one");
        char buf[128];
        chat_default_system(j, buf, sizeof buf);
        T_CHECK(strcmp(buf, SMOLLM2_SYSTEM) == 0, "default system from the GGUF: [%s]", buf);
    }
    gguf_close(g);
    /* generate: with a chat template the prompt is the user's message by default (raw, the
     * model's first token was <|im_end|> and nothing came out); --raw keeps it raw */
    const char *build = getenv("BUILD");
    char bin[512];
    snprintf(bin, sizeof bin, "%s/multidecode", build && *build ? build : "build");
    if (access(bin, X_OK) != 0) {
        T_MISSING("no %s", bin);
        return;
    }
    int st;
    char *out = t_runf(&st, "%s generate -m %s -p 'What is 2+2?' --temp 0 -n 8 -q 2>/dev/null", bin, path);
    T_CHECK(out && st == 0 && strncmp(out, "What is", 7) && strlen(out) > 4, "generate answers in chat: [%s]",
            out ? out : "(null)");
    free(out);
    out = t_runf(&st, "%s generate -m %s -p 'What is 2+2?' --temp 0 -n 8 -q --raw 2>/dev/null", bin, path);
    T_CHECK(out && st == 0 && !strncmp(out, "What is 2+2?", 12), "generate --raw echoes the raw prompt: [%s]",
            out ? out : "(null)");
    free(out);
}

/* Qwen3's thinking switch: found in its template, and the answer after </think>. */
static void test_think(void) {
    const char *qwen3 = "{%- if enable_thinking is defined and enable_thinking is false %}"
                        "{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}<|im_start|>";
    T_CHECK(chat_has_think_switch(qwen3), "Qwen3's template has the thinking switch");
    T_CHECK(!chat_has_think_switch("<|im_start|>") && !chat_has_think_switch(NULL),
            "ChatML without it, or no template: no switch");
    T_CHECK(!strcmp(chat_think_off_text(CHAT_CHATML), "<think>\n\n</think>\n\n"), "think-off text");
    /* Qwen3.5's prompt opens <think> itself: prompt + think-off text is its template's
     * enable_thinking=false output (jinja2 3.1.6 on llama.cpp's Qwen3.5-4B.jinja) */
    const chat_msg q[] = {{"user", "q"}, {"assistant", " a "}, {"user", "r"}};
    char *s = render(CHAT_QWEN35, NULL, q, 3, true);
    size_t n = strlen(s);
    s = realloc(s, n + 32);
    strcpy(s + n, chat_think_off_text(CHAT_QWEN35));
    T_CHECK(!strcmp(s, "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\na<|im_end|>\n"
                       "<|im_start|>user\nr<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"),
            "qwen35 with thinking off: [%s]", s);
    free(s);
    const char *r = "<think>a</think>b</think>\n42";
    T_CHECK(!strcmp(chat_after_think(r), "\n42"), "after the last </think>: '%s'",
            chat_after_think(r));
    T_CHECK(!strcmp(chat_after_think("plain 7"), "plain 7"), "no </think>: all of the text");
    size_t ml = 0;
    const char *h = "a</think>b<|channel|>final<|message|>c";
    T_CHECK(chat_think_close(r, &ml) == r + 17 && ml == 8 && !chat_think_close("plain 7", NULL) &&
                chat_think_close(h, &ml) == h + 10 && ml == strlen("<|channel|>final<|message|>"),
            "the close mark: the one that ends last, and its length");
}

/* Harmony (gpt-oss): what its Jinja (llama.cpp's openai-gpt-oss-120b.jinja, no tools)
 * renders, today's date included; detection; the answer after the final channel. */
static void test_harmony(void) {
    char date[32] = "", want[1024];
    const time_t now = time(NULL);
    struct tm tm;
    if (localtime_r(&now, &tm)) strftime(date, sizeof date, "%Y-%m-%d", &tm);
    const chat_msg c[] = {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", " Hello "},
                          {"tool", "x"}, {"user", "2+2?"}};
    snprintf(want, sizeof want, "<|start|>system<|message|>You are ChatGPT, a large language model "
             "trained by OpenAI.\nKnowledge cutoff: 2024-06\nCurrent date: %s\n\nReasoning: "
             "medium\n\n# Valid channels: analysis, commentary, final. Channel must be included "
             "for every message.<|end|><|start|>developer<|message|># Instructions\n\nBe brief."
             "\n\n<|end|><|start|>user<|message|>Hi<|end|><|start|>assistant<|channel|>final"
             "<|message|> Hello <|end|><|start|>user<|message|>2+2?<|end|><|start|>assistant", date);
    char *s = render(CHAT_HARMONY, NULL, c, 5, true);
    T_CHECK(!strcmp(s, want), "harmony:\n got [%s]\nwant [%s]", s, want);
    free(s);
    s = render(CHAT_HARMONY, NULL, c + 1, 2, false);
    T_CHECK(strstr(s, "<|message|>Hi<|end|><|start|>assistant<|channel|>final<|message|> Hello "
                      "<|return|>") && !strstr(s, "developer"), "harmony, last answer: [%s]", s);
    free(s);
    T_CHECK(chat_detect("{{- \"<|start|>system<|message|>\" }}...<|channel|>final") == CHAT_HARMONY,
            "harmony detected");
    const char *r = "<|channel|>analysis<|message|>think</think><|end|><|start|>assistant"
                    "<|channel|>final<|message|>4";
    T_CHECK(!strcmp(chat_after_think(r), "4"), "after harmony's final channel: '%s'",
            chat_after_think(r));
}

int main(void) {
    test_harmony();
    test_think();
    test_families();
    test_edges();
    test_default_system();
    test_detect();
    test_names();
    test_buffer();
    test_model();
    return t_done();
}
