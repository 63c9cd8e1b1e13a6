/* chat.h - chat templates: a conversation (role, content messages) rendered as the prompt
 * text an instruction-tuned model was trained on.
 *
 * This is not a Jinja interpreter. Like llama.cpp's llm_chat_apply_template, it knows a
 * few template families, recognises them in a GGUF file's tokenizer.chat_template text by
 * distinctive markers (chat_detect), and renders each in C with exactly the output the
 * official Jinja template gives under transformers' settings (trim_blocks, lstrip_blocks):
 *
 *   CHATML  SmolLM2, Qwen2.5:  <|im_start|>role\ncontent<|im_end|>\n ...
 *                              generation prompt <|im_start|>assistant\n
 *   LLAMA3  Llama-3 Instruct:  <|begin_of_text|><|start_header_id|>role<|end_header_id|>\n\n
 *                              content<|eot_id|> ... (content trimmed)
 *   LLAMA2  Llama-2 chat:      <s>[INST] <<SYS>>\nsys\n<</SYS>>\n\nuser [/INST] answer </s>
 *                              <s>[INST] user [/INST] (no generation prompt exists)
 *   ZEPHYR  zephyr-7b-beta:    <|system|>\nsys</s>\n<|user|>\nuser</s>\n<|assistant|>\n
 *   GEMMA   gemma-2b-it:       <bos><start_of_turn>user\ncontent<end_of_turn>\n ...
 *                              <start_of_turn>model\n (assistant is "model"; content trimmed)
 *   GEMMA4  Gemma 4 (-it):     <bos><|turn>system\nsys<turn|>\n<|turn>user\ncontent<turn|>\n
 *                              ... <|turn>model\n<|channel>thought\n<channel|> (thinking off,
 *                              the template's default: an empty thought channel; consecutive
 *                              answers share one model turn; content trimmed)
 *   QWEN35  Qwen3.5:           ChatML with content trimmed; generation prompt
 *                              <|im_start|>assistant\n<think>\n (thinking on, its default);
 *                              an answer after the last user turn opens with an empty
 *                              <think>\n\n</think>\n\n
 *   HARMONY gpt-oss:           <|start|>system<|message|>(identity, knowledge cutoff, today's
 *                              date, "Reasoning: medium", the valid channels)<|end|>, a first
 *                              system message as <|start|>developer<|message|># Instructions
 *                              \n\nsys\n\n<|end|>, <|start|>user<|message|>content<|end|>,
 *                              answers <|start|>assistant<|channel|>final<|message|>content
 *                              <|end|> (<|return|> for a last answer without a generation
 *                              prompt); generation prompt <|start|>assistant. The model then
 *                              writes its analysis channel before the final one.
 *
 * The rendered text holds special tokens as text ("<|im_start|>", "</s>"): tokenise it
 * with parse_special = true. Some templates write the BOS token's text themselves
 * (chat_includes_bos); then the caller must not add BOS again. Where an official template
 * rejects a conversation (Llama-2 and Gemma demand alternating user/assistant turns,
 * Gemma 1/2 refuse a system message) this renders it anyway in the obvious way rather than
 * fail: a system message is folded into the next user turn (Gemma as Gemma 3's template
 * does: "system\n\nuser"; Llama-2 as its <<SYS>> block). Not reproduced: the dated system
 * block Llama-3.1+ templates add, tool calls, and model-specific EOS texts other than
 * "</s>" in ZEPHYR (stablelm-2-zephyr uses <|endoftext|>), Gemma 4's thinking mode
 * (enable_thinking: a <|think|> system turn) and its removal of thought channels from
 * earlier answers. */
#ifndef MD_CHAT_H
#define MD_CHAT_H

#include <stdbool.h>
#include <stddef.h>

typedef enum {
    CHAT_NONE = 0, /* no template: the prompt is used as it is */
    CHAT_CHATML,
    CHAT_LLAMA3,
    CHAT_LLAMA2,
    CHAT_ZEPHYR,
    CHAT_GEMMA,
    CHAT_GEMMA4,
    CHAT_QWEN35,
    CHAT_HARMONY,
    CHAT_N_KINDS   /* count, for iterating over the names */
} chat_kind;

/* One message. role is "system", "user" or "assistant" (other roles are passed through
 * where the template does that: ChatML, Llama-3, Gemma; dropped by Llama-2 and Zephyr,
 * as their Jinja does). content NULL counts as "". Both are borrowed for the call. */
typedef struct chat_msg {
    const char *role;
    const char *content;
} chat_msg;

/* The family of a tokenizer.chat_template text, CHAT_NONE when it is NULL or not
 * recognised. A text that is exactly a template name ("chatml") gives that template, as
 * in llama.cpp. Markers: "<|im_start|>" (but not Phi-4's "<|im_sep|>" nor SmolVLM's
 * "<end_of_utterance>"; with "<|vision_start|>" and enable_thinking it is Qwen3.5's), "<|start_header_id|>" with "<|end_header_id|>", "<start_of_turn>",
 * "<|turn>" with "<turn|>" (Gemma 4), "<|start|>" with "<|channel|>" (harmony),
 * "[INST]" with "<<SYS>>" (Mistral's [INST] templates without <<SYS>> differ and are not
 * taken), "<|user|>" with "<|assistant|>" and eos_token but without Phi-3's "<|end|>". */
chat_kind chat_detect(const char *jinja);

/* "chatml", "llama3", "llama2", "zephyr", "gemma", "gemma4", "qwen35", "harmony" (exact,
 * lower case);
 * CHAT_NONE for
 * NULL or any other name. */
chat_kind chat_from_name(const char *name);
/* The name chat_from_name takes; "none" for CHAT_NONE or a value out of range. */
const char *chat_name(chat_kind k);

/* True when the text chat_apply renders starts with the model's BOS token text (Llama-3
 * "<|begin_of_text|>", Llama-2 "<s>", Gemma and Gemma 4 "<bos>") for a conversation whose first
 * message is a system or user message: tokenise it with add_bos = false. False for
 * ChatML and Zephyr, whose templates leave BOS to the tokenizer (tok_add_bos). */
bool chat_includes_bos(chat_kind k);

/* Renders n messages (msgs may be NULL when n is 0) and, when add_generation_prompt, the
 * opening of the assistant's turn (Llama-2 has none: its text ends with " [/INST]";
 * Zephyr writes it only after at least one message, as its Jinja does). Writes at most
 * cap - 1 bytes and a NUL when cap > 0 (cut short, like snprintf) and returns the length
 * of the full text, excluding the NUL: call with cap = 0 to size the buffer. CHAT_NONE
 * (or a value out of range) renders "". Never fails; out may be NULL when cap is 0. */
size_t chat_apply(chat_kind k, const chat_msg *msgs, size_t n, bool add_generation_prompt,
                  char *out, size_t cap);

/* As chat_apply, but when default_system is not NULL, n > 0 and msgs[0] is not a system
 * message, a system message with that content is rendered first: what SmolLM2's and
 * Qwen2.5's templates do when the conversation has no system message. */
size_t chat_apply_with_default(chat_kind k, const char *default_system, const chat_msg *msgs,
                               size_t n, bool add_generation_prompt, char *out, size_t cap);

/* The system message a ChatML template inserts when the conversation has none, read from
 * its Jinja text: the string literal "<|im_start|>system\n<text><|im_end|>" (SmolLM2:
 * "You are a helpful AI assistant named SmolLM, trained by Hugging Face"). Jinja string
 * escapes (\n, \', \", \\) are decoded. Returns the text's length and fills out like
 * chat_apply; returns 0 (and writes "" when cap > 0) when there is none or jinja is NULL. */
size_t chat_default_system(const char *jinja, char *out, size_t cap);

/* The text that puts user as a new user turn and opens the assistant's turn after it, for
 * a prompt that grows token by token (the TUI's :ask), filled like chat_apply:
 *   first: the conversation's start: exactly chat_apply_with_default(k, default_system,
 *          {user}, 1, true) (what `multidecode ask` renders per question);
 *   !first: what follows an assistant's answer whose end-of-turn was never written (a
 *          grown answer stops before its end-of-generation token): that turn's close,
 *          the user turn and the assistant header (ChatML: "<|im_end|>\n<|im_start|>user
 *          \nUSER<|im_end|>\n<|im_start|>assistant\n"); no system message, no BOS.
 * CHAT_NONE (or a value out of range): user as it is. Returns 0 and writes "" when out of
 * memory (!first renders the whole conversation in a scratch buffer). */
size_t chat_user_turn(chat_kind k, const char *default_system, const char *user, bool first,
                      char *out, size_t cap);

/* ---- reasoning: Qwen3's thinking switch ----
 * Qwen3's template renders, when the caller sets enable_thinking to false, an empty
 * reasoning block after the generation prompt, so the model answers at once; otherwise the
 * model opens <think> itself and reasons first. */

/* True when the template text has the switch (it tests enable_thinking and writes
 * <think>); NULL gives false. */
bool chat_has_think_switch(const char *jinja);
/* What a template of kind k appends to chat_apply's generation prompt to turn thinking
 * off: "<think>\n\n</think>\n\n", or for Qwen3.5, whose prompt already opened
 * "<think>\n", "\n</think>\n\n" (static). */
const char *chat_think_off_text(chat_kind k);
/* Where a reply's thinking closes: its last "</think>" or harmony's
 * "<|channel|>final<|message|>" (the one that ends last), the mark's length in *mark_len
 * (may be NULL); NULL when text has neither. Points into text. */
const char *chat_think_close(const char *text, size_t *mark_len);
/* The part of a reply after chat_think_close's mark (the answer), or text itself when it
 * has none. Points into text. */
const char *chat_after_think(const char *text);

#endif
