"""The catalogue of known mistakes: one id and one student-facing sentence for each.

Both check layers name a mistake by its id: the public self-checks (`coursekit.checks`) show its text as a hint, the
hidden checks of the grader (`autograder.checks`) write it into their message and hand the id on as data, and the
class report counts ids. The public hints already reveal these mistakes, so the catalogue lives on the student side
(this module imports nothing from `solutions` or `autograder`).

Each entry also holds the mistake's `fix`, the advice that both layers show with its text (the public check's HINT, the
hidden check's `hint:` line), so the advice is written once. An id reads `<topic>.<what went wrong>`; `api` is the course API name (docs/course-api.md) whose check diagnoses it
first (a mistake such as an inverted mask can show up in the checks of later exercises too).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mistake:
    id: str    # e.g. "attention.missing_scale"
    api: str   # e.g. "scaled_dot_product_attention"
    text: str  # what the student did, in one sentence
    fix: str = ""  # what to do about it, in one sentence: the advice both check layers show (its one home)


_CATALOGUE = [
    # ------------------------------------------------------------------------------------ 01 tokens and embeddings
    ("vocab.ties", "build_vocab",
     "ties are not broken alphabetically (tokens with the same count must be sorted by the string)"),
    ("vocab.specials_last", "build_vocab", "the special tokens do not come first (they take ids 0, 1, 2, 3 ...)"),
    ("vocab.min_freq_strict", "build_vocab",
     "min_freq is applied as count > min_freq; keep tokens with count >= min_freq"),
    ("vocab.special_duplicate", "build_vocab",
     "a token equal to a special got a second id; it must keep the special's id"),
    ("vocab.ascending", "build_vocab",
     "tokens are ordered by ascending count; the most frequent token must come first"),
    ("vocab.generator_read_twice", "build_vocab",
     "the texts are iterated more than once, so a generator is empty the second time: count in a single pass"),
    ("encode.unk_hardcoded", "encode", "unknown tokens get a hard-coded id; use vocab['<unk>']"),
    ("pad_batch.pre_padding", "pad_batch", "the padding is put in front (pre-padding); pad at the end"),
    ("pad_batch.truncate_front", "pad_batch",
     "sequences longer than max_len are cut at the front; keep the first max_len tokens"),
    ("pad_batch.pad_id_ignored", "pad_batch", "the padding value ignores pad_id"),
    ("embedding.scaled", "TokenEmbedding",
     "the embedding output is scaled by sqrt(d_model); TokenEmbedding returns weight[ids] unscaled"),
    ("embedding.unit_init", "TokenEmbedding", "the old N(0, 1) initialisation: multiply by d_model ** -0.5"),
    ("embedding.padding_row_not_zero", "TokenEmbedding", "the row padding_idx of the weight is not all zeros"),
    ("word2vec.by_iteration", "embedding_matrix_from_word2vec",
     "rows are placed by the vocabulary's iteration order instead of by each word's id"),
    ("word2vec.missing_not_zero", "embedding_matrix_from_word2vec",
     "rows of words missing from word2vec must be zeros"),
    # ------------------------------------------------------------------------------------- 02 positional encoding
    ("positional.sin_cos_swapped", "sinusoidal_positional_encoding",
     "sin and cos are swapped (sin goes to the even columns 2i, cos to the odd ones 2i+1)"),
    ("positional.exponent_per_column", "sinusoidal_positional_encoding",
     "wrong exponent: use 2i/d_model with i the pair index (columns 2i and 2i+1 share one frequency)"),
    ("positional.exponent_no_two", "sinusoidal_positional_encoding",
     "wrong exponent: the frequency is 1 / 10000**(2i/d_model), the factor 2 is missing"),
    ("positional.halves", "sinusoidal_positional_encoding",
     "sin and cos are placed in two halves instead of alternating columns (sin at 2i, cos at 2i+1)"),
    ("positional.frequency_base", "sinusoidal_positional_encoding",
     "wrong frequency base: the frequencies are 1 / 10000**(2i/d_model)"),
    ("positional.from_batch_axis", "PositionalEncoding",
     "positions are taken from the batch axis (dim 0) instead of the sequence axis (dim 1)"),
    ("positional.x_not_added", "PositionalEncoding", "the input x is not added (forward must return x + positions)"),
    ("positional.dropout_ignored", "PositionalEncoding",
     "dropout is not applied: forward returns dropout(x + pe[:T]) (it only acts in training mode)"),
    ("positional.dropout_before_add", "PositionalEncoding",
     "dropout is applied to x before the positions are added; apply it to the sum, dropout(x + pe[:T])"),
    ("positional.dropout_in_eval", "PositionalEncoding",
     "dropout also acts in eval mode (F.dropout without training=self.training); nn.Dropout switches itself off"),
    # --------------------------------------------------------------------------------------- 03 attention and masks
    ("causal_mask.diagonal_blocked", "make_causal_mask",
     "the diagonal is blocked: position i may attend to itself (j <= i)"),
    ("causal_mask.upper_triangle", "make_causal_mask",
     "the mask is upper-triangular: position i may attend to j <= i (the lower triangle)"),
    ("attention.missing_scale", "scaled_dot_product_attention", "the scores are not divided by sqrt(d_k)"),
    ("attention.scale_multiplied", "scaled_dot_product_attention",
     "the scores are multiplied by sqrt(d_k) instead of divided"),
    ("attention.scale_by_d", "scaled_dot_product_attention", "the scores are divided by d_k instead of sqrt(d_k)"),
    ("attention.scale_by_length", "scaled_dot_product_attention",
     "the scores are divided by the square root of the sequence length instead of sqrt(d_k), the width of the keys"),
    ("attention.softmax_dim", "scaled_dot_product_attention",
     "softmax is taken over the wrong dimension (it must run over the keys, the last dim)"),
    ("attention.mask_inverted", "scaled_dot_product_attention",
     "the mask polarity is inverted (our convention: True = may attend, False = blocked)"),
    ("attention.mask_ignored", "scaled_dot_product_attention", "the mask is not applied"),
    ("attention.mask_after_softmax", "scaled_dot_product_attention",
     "the mask is applied after the softmax (blocked scores must be filled before it)"),
    # -------------------------------------------------------------------------------------- 04 multi-head attention
    ("multi_head.split_no_transpose", "split_heads",
     "the heads are split with a reshape but without transposing (B, T, H, d_head) -> (B, H, T, d_head)"),
    ("multi_head.split_interleaved", "split_heads",
     "head h takes every H-th feature instead of the block h*d_head:(h+1)*d_head"),
    ("multi_head.merge_no_transpose", "merge_heads",
     "the heads are not merged back correctly: transpose (B, H, T, d_head) -> (B, T, H, d_head) before reshaping"),
    ("multi_head.scale_d_model", "MultiHeadAttention",
     "the scores are divided by sqrt(d_model) instead of sqrt(d_k) = sqrt(d_model / num_heads)"),
    ("multi_head.inputs_mixed", "MultiHeadAttention",
     "the inputs are mixed up: w_q projects `query`, w_k projects `key` and w_v projects `value` "
     "(key and value are different tensors in general)"),
    # ------------------------------------------------------------------------------------------------- 05 encoder
    ("encoder.no_relu", "PositionwiseFeedForward", "the ReLU between linear1 and linear2 is missing"),
    ("encoder.gelu", "PositionwiseFeedForward",
     "a GELU (or another activation) sits between linear1 and linear2: notebook 05's feed-forward uses ReLU"),
    ("encoder.relu_after_linear2", "PositionwiseFeedForward", "a ReLU is applied after linear2 as well"),
    ("encoder.norm_swapped", "EncoderBlock",
     "pre-norm and post-norm are swapped (norm_first=False means x = norm(x + sublayer(x)))"),
    ("encoder.missing_residual_attn", "EncoderBlock",
     "the residual connection around the attention sublayer is missing"),
    ("encoder.missing_residual_ffn", "EncoderBlock",
     "the residual connection around the feed-forward sublayer is missing"),
    ("encoder.no_embedding_scale", "Encoder", "the token embeddings are not multiplied by sqrt(d_model)"),
    ("encoder.no_positions", "Encoder", "the positional encoding is not added"),
    ("encoder.final_norm", "Encoder",
     "the final LayerNorm is wrong (it belongs only to the pre-norm stack, norm_first=True)"),
    # ------------------------------------------------------------------------------------ 06 decoder and Transformer
    ("decoder.missing_residual_cross", "DecoderBlock",
     "the residual connection around the cross-attention sublayer is missing"),
    ("decoder.cross_from_decoder", "DecoderBlock",
     "cross-attention takes its keys/values from the decoder (x) instead of the encoder memory"),
    ("decoder.masks_swapped", "DecoderBlock", "tgt_mask and memory_mask are swapped between self- and cross-attention"),
    ("decoder.tgt_mask_ignored", "DecoderBlock", "the target mask is not applied in the decoder's self-attention"),
    ("transformer.no_causal_mask", "Transformer",
     "the target has no causal mask (position i must not see positions after i)"),
    ("transformer.no_src_mask", "Transformer", "the source padding mask is not applied"),
    ("transformer.pad_id_hardcoded", "Transformer", "the pad id is hard-coded as 0 instead of using pad_id"),
    ("greedy.keeps_bos", "greedy_decode", "the output still starts with bos_id; return only the generated tokens"),
    ("greedy.no_early_stop", "greedy_decode", "decoding does not stop when every sequence has produced eos_id"),
    ("greedy.stops_at_first_eos", "greedy_decode",
     "decoding stops as soon as one sequence produced eos_id; wait until every sequence has"),
    ("greedy.no_pad_after_eos", "greedy_decode", "tokens after a sequence's eos_id must be the model's pad_id"),
    ("greedy.drops_eos", "greedy_decode", "the eos_id token itself is missing from the output"),
    ("greedy.argmax_wrong_axis", "greedy_decode",
     "the argmax runs over the wrong axis: the next token is the argmax over the vocabulary (dim=-1)"),
    ("cache.recomputes_prefix", "cached_greedy_decode",
     "the keys/values of the whole prefix are projected again at every step (no cache)"),
    ("cache.recomputes_memory", "cached_greedy_decode",
     "the memory's cross-attention keys/values are projected again at every step (once per call is enough)"),
    # ---------------------------------------------------------------------------------------------- 07 classifier
    ("pool.includes_padding", "masked_mean_pool",
     "pooling includes padding: you averaged over all T positions, padding too"),
    ("pool.divides_by_T", "masked_mean_pool",
     "divided by T instead of by the number of real tokens in each row"),
    ("pool.mask_inverted", "masked_mean_pool",
     "mask polarity inverted: you averaged the padding positions (mask is True where a token is real)"),
    ("pool.in_place", "masked_mean_pool",
     "x or the mask is changed in place (an in-place operation such as x.mul_), so the caller's tensors change"),
    ("pool.no_division", "masked_mean_pool", "summed the real positions but did not divide by their count"),
    ("pool.divides_by_batch_count", "masked_mean_pool",
     "divided by the total number of real tokens in the batch, not per row"),
    ("pool.mask_wrong_axis", "masked_mean_pool",
     "the mask gets its new axis in the wrong place: mask.unsqueeze(-1) (B, T, 1) lines up with x (B, T, d)"),
    ("classifier.pool_includes_padding", "TransformerClassifier",
     "pooling includes padding: average only the real positions (mask_mean_pool with the padding mask)"),
    ("classifier.encoder_no_mask", "TransformerClassifier",
     "the encoder got no padding mask: real tokens attend to padding"),
    ("classifier.pad_id_hardcoded", "TransformerClassifier",
     "the padding id is hard-coded as 0: use the model's `pad_id`"),
    ("classifier.returns_probabilities", "TransformerClassifier",
     "returns probabilities: forward must return raw logits (F.cross_entropy applies the softmax itself)"),
    ("classifier.returns_log_probabilities", "TransformerClassifier",
     "returns log-probabilities: forward must return raw logits (F.cross_entropy applies log_softmax)"),
    ("classifier.first_position", "TransformerClassifier",
     "classifies the first position instead of the mean over the real positions"),
    ("classifier.max_pooling", "TransformerClassifier", "max-pooling instead of mean-pooling"),
    ("classifier.padding_not_excluded", "TransformerClassifier",
     "padding positions are not excluded (padding mask in the encoder and in the pooling)"),
    ("training.no_zero_grad", "train_one_epoch", "forgot optimizer.zero_grad(): gradients of earlier batches pile up"),
    ("training.softmax_before_loss", "train_one_epoch",
     "softmax before cross_entropy: F.cross_entropy takes raw logits (it applies log_softmax itself)"),
    ("training.nll_on_logits", "train_one_epoch",
     "F.nll_loss on raw logits: it expects log-probabilities (use F.cross_entropy on the logits)"),
    ("training.loss_summed", "train_one_epoch",
     "the loss is summed over the batch instead of averaged (reduction='mean' is the default)"),
    ("training.no_step", "train_one_epoch",
     "the weights never change: optimizer.step() is missing, or optimizer.zero_grad() sits between backward() "
     "and step()"),
    ("training.returns_sum", "train_one_epoch", "returns the sum of the batch losses, not their mean"),
    ("training.returns_last", "train_one_epoch", "returns the last batch's loss, not the mean over the epoch"),
    ("training.returns_first", "train_one_epoch", "returns the first batch's loss, not the mean over the epoch"),
    ("training.no_train_mode", "train_one_epoch",
     "forgot model.train() (dropout stays off and the model does not learn as it should)"),
    ("training.under_no_grad", "train_one_epoch", "training must not run under torch.no_grad()"),
    ("evaluate.no_eval_mode", "evaluate", "forgot model.eval(): the model ran in training mode (dropout on)"),
    ("evaluate.grad_enabled", "evaluate", "forgot torch.no_grad() (evaluation builds no graph)"),
    ("evaluate.percentage", "evaluate", "returns a percentage: return a fraction between 0 and 1"),
    ("evaluate.count", "evaluate", "returns the number of correct examples, not the fraction"),
    ("evaluate.mean_of_batches", "evaluate",
     "averages the per-batch accuracies: batches differ in size, count over all examples"),
    ("evaluate.error_rate", "evaluate", "returns the error rate (1 - accuracy)"),
    ("evaluate.divides_by_batches", "evaluate",
     "divides by the number of batches instead of the number of examples"),
    # ------------------------------------------------------------------------------------ 08 GPT language model
    ("bpe.ties", "train_bpe",
     "ties between equally frequent pairs are not broken by first occurrence (take the pair that appears first in "
     "the current sequence)"),
    ("bpe.count_without_overlap", "train_bpe",
     "pairs are counted without overlap; count every adjacent pair, zip(ids, ids[1:])"),
    ("bpe.merge_overlapping", "train_bpe",
     "merges overlap: a pair is replaced at every position, so 'aaa' becomes two new tokens; replace left to right "
     "and skip both merged ids"),
    ("bpe.no_early_stop", "train_bpe", "merging goes on when the most frequent pair occurs only once"),
    ("bpe.new_id", "train_bpe", "the new token ids are not 256 + k for the k-th merge"),
    ("bpe.encode_order", "bpe_encode", "the merges are not applied in the order they were learned"),
    ("bpe.encode_most_frequent", "bpe_encode",
     "the present merge whose pair occurs most often is applied first; apply the merges in the order they were "
     "learned (the earliest-learned present pair first)"),
    ("bpe.encode_characters", "bpe_encode",
     "the text is split into characters (ord) instead of its UTF-8 bytes, so non-ASCII text goes wrong"),
    ("bpe.decode_per_token", "bpe_decode",
     "each token's bytes are decoded on their own; join all bytes first, then decode once (a character may span "
     "tokens)"),
    ("bpe.decode_latin1", "bpe_decode", "the bytes are decoded as Latin-1 (one character per byte) instead of UTF-8"),
    ("gpt.untied_head", "GPT", "the output layer is not tied to the token embedding"),
    ("gpt.position_init", "GPT",
     "the position table keeps nn.Embedding's N(0, 1) initialisation; re-initialise it with std d_model ** -0.5"),
    ("gpt.no_causal_mask", "GPT", "the blocks run without the causal mask, so every position sees future tokens"),
    ("gpt.mask_inverted", "GPT", "the causal mask is transposed: positions see the future and not the past"),
    ("gpt.embedding_scaled", "GPT", "the token embeddings are multiplied by sqrt(d_model); GPT adds them unscaled"),
    ("gpt.post_norm", "GPT", "the blocks are post-norm; a GPT block is pre-norm (norm_first=True)"),
    ("gpt.no_final_norm", "GPT", "the final LayerNorm before lm_head is missing"),
    ("get_batch.no_shift", "get_batch", "the targets y are not shifted: y must be x moved one token to the right"),
    ("get_batch.swapped", "get_batch", "x and y are returned in swapped order"),
    ("get_batch.shift", "get_batch", "the targets are shifted by the wrong number of tokens (off by one)"),
    ("get_batch.start_range", "get_batch",
     "the start positions are drawn from the wrong range; use torch.randint(len(data) - block_size, ...)"),
    ("lm_loss.sum", "lm_loss", "the loss is summed over positions instead of averaged"),
    ("lm_loss.softmax_first", "lm_loss",
     "a softmax is applied before F.cross_entropy, which already includes log-softmax"),
    ("lm_loss.shifted_again", "lm_loss",
     "logits and targets are shifted again inside lm_loss; get_batch already aligned them"),
    ("lm_loss.python_float", "lm_loss",
     "the loss is returned as a Python float (.item()), so training cannot back-propagate through it; return the "
     "scalar tensor"),
    ("estimate_loss.train_mode", "estimate_loss",
     "the model stays in training mode while the loss is estimated (dropout left on); call model.eval()"),
    ("estimate_loss.last_window", "estimate_loss",
     "the last window that fits is left out (off by one in the range of start positions)"),
    ("estimate_loss.overlapping", "estimate_loss", "overlapping windows are used; step the start by block_size"),
    ("estimate_loss.mode_not_restored", "estimate_loss",
     "estimate_loss leaves the model in eval mode; restore the training mode it had"),
    ("lr_at.warmup_off_by_one", "lr_at", "the warm-up uses step / warmup_steps; use (step + 1) / warmup_steps"),
    ("lr_at.cosine_from_zero", "lr_at",
     "the cosine starts at step 0 instead of at the end of the warm-up"),
    ("lr_at.min_lr_ignored", "lr_at", "min_lr is ignored: the cosine decays to 0"),
    ("train_step.no_zero_grad", "train_step",
     "the gradients are not cleared: each step adds its gradients to the previous steps'; clear them before backward"),
    ("train_step.zero_grad_after_backward", "train_step",
     "the gradients are cleared between the backward pass and the step, so the step has no gradients to use"),
    ("train_step.clip_after_step", "train_step",
     "the gradients are clipped after optimizer.step(), when the step has already used them; clip before the step"),
    ("train_step.no_clip", "train_step", "the gradients are not clipped to grad_clip (clip_grad_norm_ before the step)"),
    ("train_step.lr_not_set", "train_step", "the learning rate lr is not set on the optimizer's parameter groups"),
    ("train_step.lr_first_group_only", "train_step",
     "the learning rate is set on the first parameter group only; every group must get lr"),
    ("train_step.no_step", "train_step", "optimizer.step() is never called, so the weights do not change"),
    ("train_step.returns_tensor", "train_step",
     "the loss is returned as a tensor; return a Python float (loss.item())"),
    ("train_step.loss_after_step", "train_step",
     "the returned loss is computed after the step; return the loss of the batch before the step"),
    ("train_step.mode_changed", "train_step",
     "train_step changes the model's training mode; leave it as the caller set it"),
    ("sample.temperature_after_softmax", "sample_next_token",
     "the temperature divides the probabilities after the softmax (no effect); divide the logits before it"),
    ("sample.temperature_multiplied", "sample_next_token",
     "the logits are multiplied by the temperature instead of divided"),
    ("sample.top_k_minus_one", "sample_next_token", "top-k keeps only k - 1 tokens"),
    ("sample.generator_ignored", "sample_next_token",
     "the draw does not come from the generator it is given (one call torch.multinomial(probs, 1, "
     "generator=generator))"),
    ("sample.top_k_drops_ties", "sample_next_token",
     "top-k keeps exactly k tokens and drops logits equal to the k-th largest; keep every tie"),
    ("generate.first_position", "generate", "the next token is taken from the first position's logits, not the last"),
    ("generate.keeps_first_tokens", "generate",
     "the context keeps the first max_len tokens (ids[:, :max_len]); feed the last ones, ids[:, -model.max_len:]"),
    ("generate.train_mode", "generate", "the model generates in training mode (dropout on); call model.eval()"),
    ("generate.mode_not_restored", "generate", "generate leaves the model in eval mode; restore the training mode it had"),
    # ------------------------------------------------------------------------------------------ 09 the modern block
    ("rms_norm.mean_wrong_axis", "RMSNorm",
     "the mean of the squares is taken over the wrong axis: average over the features only (dim=-1, keepdim=True)"),
    ("rms_norm.eps_outside_root", "RMSNorm",
     "eps is added outside the square root: divide by sqrt(mean(x ** 2) + eps), eps inside the root"),
    ("rms_norm.subtracts_mean", "RMSNorm",
     "the mean is subtracted as in LayerNorm: RMSNorm divides by the root mean square and does not centre"),
    ("rms_norm.no_weight", "RMSNorm", "the learned `weight` is not applied (multiply the normalised x by it)"),
    ("rms_norm.bias", "RMSNorm", "RMSNorm has a bias; its only parameter is `weight`"),
    ("rms_norm.weight_not_ones", "RMSNorm", "`weight` does not start as ones"),
    ("rotary.exponent_no_two", "rotary_cos_sin",
     "the angle's exponent is off by a factor of two: angle[p, i] = p * base ** (-2 * i / d_head)"),
    ("rotary.cos_sin_swapped", "rotary_cos_sin", "cos and sin are returned in swapped order: return (cos, sin)"),
    ("rotary.halves", "apply_rotary",
     "the two halves of the features are rotated together instead of interleaved pairs (x[..., 2i], x[..., 2i+1])"),
    ("rotary.wrong_direction", "apply_rotary",
     "the pairs are rotated the wrong way: out[2i] = x[2i] * cos - x[2i+1] * sin, out[2i+1] = x[2i] * sin + "
     "x[2i+1] * cos"),
    ("rotary.base_ignored", "rotary_cos_sin", "the base argument is ignored: the tables always use 10000"),
    ("rotary.own_tables", "apply_rotary",
     "apply_rotary builds tables of its own (base 10000) instead of using the cos and sin it is given"),
    ("swiglu.gate_up_swapped", "SwiGLU",
     "gate and up are swapped: the SiLU goes on w_gate(x), which then multiplies w_up(x)"),
    ("swiglu.relu", "SwiGLU", "ReLU (or another activation) instead of SiLU on the gate: use F.silu"),
    ("swiglu.bias", "SwiGLU", "the linear layers have biases; all three take bias=False"),
    ("gqa.rotates_values", "GroupedQueryAttention",
     "the values are rotated too: rotary angles go on the queries and keys only"),
    ("gqa.no_rotary", "GroupedQueryAttention", "the rotary angles are not applied to the queries and keys"),
    ("gqa.rotary_queries_only", "GroupedQueryAttention",
     "only the queries are rotated: rotate the keys too, so that the score depends on the offset between positions"),
    ("gqa.kv_heads_tiled", "GroupedQueryAttention",
     "the key/value heads are repeated in the wrong order (.repeat tiles them, so query head h gets key/value "
     "head h % num_kv_heads): use repeat_interleave, so that it gets h // (num_heads // num_kv_heads)"),
    ("gqa.head_mod_groups", "GroupedQueryAttention",
     "query head h is mapped to key/value head h % groups: it uses key/value head h // groups "
     "(groups = num_heads // num_kv_heads)"),
    ("gqa.tables_in_state_dict", "GroupedQueryAttention",
     "the rotary tables are saved in the state_dict; register them with persistent=False"),
    ("llama.post_norm", "LlamaBlock",
     "the norms are applied after the residual sum (post-norm): the block is x + attn(norm1(x)), then "
     "x + ffn(norm2(x))"),
    ("llama.missing_residual", "LlamaBlock", "a residual connection (x + ...) is missing around a sublayer"),
    ("modern_gpt.no_causal_mask", "ModernGPT",
     "the blocks get no causal mask: position t must not see the tokens after it"),
    ("modern_gpt.no_final_norm", "ModernGPT", "the final RMSNorm before lm_head is missing"),
    ("modern_gpt.embedding_scaled", "ModernGPT",
     "the token embeddings are multiplied by sqrt(d_model): ModernGPT uses them unscaled"),
    ("modern_gpt.untied_head", "ModernGPT",
     "ModernGPT's lm_head has a weight of its own instead of the token embedding's"),
    ("modern_gpt.position_table", "ModernGPT",
     "ModernGPT has a position table; positions enter only through the rotary angles"),
    # ------------------------------------------------------------------------------------------------ 10 translate
    ("smoothing.over_other_classes", "label_smoothed_cross_entropy",
     "the smoothing mass is spread over the V - 1 classes other than the target: spread it over all V classes, the "
     "target included (as F.cross_entropy's label_smoothing does)"),
    ("smoothing.ignored_positions_counted", "label_smoothed_cross_entropy",
     "positions whose target is ignore_index (padding) still add to the loss: leave them out"),
    ("smoothing.mean_over_all_positions", "label_smoothed_cross_entropy",
     "the loss is divided by every position, padding included: average over the positions that are not ignored"),
    ("smoothing.sum_not_mean", "label_smoothed_cross_entropy",
     "the smoothed loss is summed over the kept positions instead of averaged over them"),
    ("smoothing.weights_swapped", "label_smoothed_cross_entropy",
     "the two weights are swapped: the target's term gets 1 - smoothing, the uniform term gets smoothing"),
    ("smoothing.python_float", "label_smoothed_cross_entropy",
     "the loss is returned as a Python number (.item()), so training cannot back-propagate through it"),
    ("smoothing.detached", "label_smoothed_cross_entropy",
     "the loss is cut off from the logits (.detach(), .numpy() or torch.tensor of a value on the way), so "
     ".backward() gives them no gradient"),
    ("noam.step_zero", "noam_lr",
     "step 0 is used as it is (0 ** -0.5 divides by zero): the schedule uses s = max(step, 1)"),
    ("noam.min_max_swapped", "noam_lr",
     "max is taken where the schedule takes min: the rate is the smaller of the two terms, so it rises during "
     "warm-up and then decays"),
    ("noam.no_d_model_scale", "noam_lr", "the factor d_model ** -0.5 is missing"),
    ("noam.factor_ignored", "noam_lr", "the factor argument is ignored: it multiplies the whole schedule"),
    ("beam.no_length_penalty", "beam_search",
     "finished hypotheses are ranked by their raw score: divide by ((5 + L) / 6) ** length_penalty"),
    ("beam.penalty_on_unfinished", "beam_search",
     "the length penalty is applied while pruning the beam: the beam keeps the highest raw scores, the penalty only "
     "ranks finished hypotheses"),
    ("beam.continues_after_eos", "beam_search",
     "a hypothesis that produced <eos> stays in the beam and keeps growing: it is finished, and leaves the beam"),
    ("beam.length_counts_bos", "beam_search",
     "the length L in the penalty counts <bos>: L is the number of tokens after <bos>, <eos> included"),
    ("beam.returns_bos", "beam_search", "the returned tokens start with <bos>: return the tokens after it"),
    ("beam.dropout_on", "beam_search",
     "the model decodes in training mode (dropout on): switch to eval mode and restore the mode afterwards"),
    ("beam.mode_not_restored", "beam_search", "beam_search does not put the model back in the mode it found it in"),
    ("bleu.no_clipping", "corpus_bleu",
     "n-gram matches are not clipped: a hypothesis n-gram counts at most as often as it occurs in the reference"),
    ("bleu.brevity_inverted", "corpus_bleu",
     "the brevity penalty is inverted: it is exp(1 - r / c) when the hypotheses are shorter (c < r), else 1"),
    ("bleu.no_brevity_penalty", "corpus_bleu", "the brevity penalty is missing: short output is not penalised"),
    ("bleu.arithmetic_mean", "corpus_bleu",
     "the precisions are averaged arithmetically: BLEU takes their geometric mean"),
    ("bleu.sentence_average", "corpus_bleu",
     "BLEU is computed per sentence and averaged: sum the counts over the corpus, then compute one score"),
    ("bleu.fraction_not_percent", "corpus_bleu", "the score is a fraction in [0, 1]: report it in [0, 100]"),
]

MISTAKES: dict[str, Mistake] = {entry[0]: Mistake(*entry) for entry in _CATALOGUE}
assert len(MISTAKES) == len(_CATALOGUE), "a mistake id is listed twice"


def mistakes_for(api_name: str) -> list[Mistake]:
    """The mistakes first diagnosed by the check of `api_name`, in catalogue order."""
    return [m for m in MISTAKES.values() if m.api == api_name]


def text_of(mistake_id: str) -> str:
    """The student-facing text of a catalogue id (KeyError with the id when there is no such mistake)."""
    try:
        return MISTAKES[mistake_id].text
    except KeyError:
        raise KeyError(f"no mistake {mistake_id!r} in coursekit.mistakes") from None


def fix_of(mistake_id: str) -> str:
    """The advice of a catalogue id ("" when the entry has none yet)."""
    try:
        return MISTAKES[mistake_id].fix
    except KeyError:
        raise KeyError(f"no mistake {mistake_id!r} in coursekit.mistakes") from None


def shown_text(mistake_id: str) -> str:
    """What a report shows for a stored mistake id: the catalogue's text; a value that is no id (a gradebook row
    written before the catalogue held the text itself) is shown as it is."""
    known = MISTAKES.get(mistake_id)
    return known.text if known else mistake_id
