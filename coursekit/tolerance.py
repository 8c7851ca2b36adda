"""The course's numerical tolerances: the one place where they are stated.

Both check layers read them from here: the public self-checks (`coursekit.checks`) and, through
`autograder/checks/kit/tolerance.py` (which adds the grading device), the hidden checks and the proofs of the reference
(`tests/solutions`). Each is an `atol`/`rtol` pair (a dict to splat into `torch.allclose`) or one named bound, with the
reason it has that size.
"""
from __future__ import annotations

# float32 on CPU: the whole course compares modules at this precision.
CPU_FLOAT32 = {"atol": 1e-5, "rtol": 1e-4}
# float32 on CUDA with TF32 disabled: kernels sum in a different order, so allow a little more.
CUDA_FLOAT32 = {"atol": 1e-4, "rtol": 1e-3}
# float64 anywhere (used by tests that need exactness beyond float32 noise).
FLOAT64 = {"atol": 1e-10, "rtol": 1e-8}

# embeddings: the statistics of a freshly initialised embedding table N(0, std), measured over thousands of entries
# (their sampling error is about 1 % of std), so these bounds only catch a wrong scale or a shifted distribution.
INIT_STD_RTOL = 0.05   # its standard deviation within 5 % of the intended one
INIT_MEAN_RTOL = 0.4   # its mean within 0.4 intended standard deviations of 0

# positional: sin and cos lie in [-1, 1]; float32 rounding may step past by this much.
SINUSOID_BOUND_SLACK = 1e-6
# positional: a known wrong table in float32 is recognised at this atol (a wrong frequency can make angles in the
# thousands, whose float32 values lose digits the float64 table keeps), looser than the comparison's CPU_FLOAT32.
WRONG_TABLE_ATOL = 1e-4
# positional: dropout with p = 0.5 over >= 200 entries zeroes a fraction within p +- this (about 7 standard errors).
DROPOUT_FRACTION_SLACK = 0.25

# classifier: train_one_epoch's mean loss of an epoch, float32 batch losses added up in another order than the
# reference's (both layers): |got - expected| <= atol + rtol * |expected|.
EPOCH_LOSS = {"atol": 1e-4, "rtol": 1e-4}
# classifier: an accuracy is a ratio of small counts, so two different ones differ by far more than this.
ACCURACY_ATOL = 1e-6
# classifier: the same reviews with padding appended give the same logits up to this (the padded keys change the
# length of the softmax's sums, so float32 rounding differs).
PADDING_APPENDED = {"atol": 1e-4, "rtol": 1e-4}
# classifier: five epochs with lr 1.0 on one batch must lower the public check's loss by more than this.
LOSS_DECREASE = 1e-3

# modern: rotary tables made in float32 or in float64 differ slightly, so outputs that go through rotary angles are
# compared at the contract's atol 1e-4: ROTARY_ATOL in the public checks, and the course's tolerance times
# ROTARY_LOOSER in the hidden ones (1e-5 * 10 on the CPU).
ROTARY_ATOL = 1e-4
ROTARY_LOOSER = 10.0
# modern: one float32 vector rotated to two position pairs of the same offset gives the same score up to this.
ROTARY_OFFSET_ATOL = 1e-3

# gpt: GPT's token and position tables, initialised N(0, d_model ** -0.5), have a measured std within 20 % of that
# (thousands of entries; a table left at nn.Embedding's N(0, 1) is off by a factor sqrt(d_model)).
GPT_TABLE_STD_RTOL = 0.2
# gpt: the hidden estimate_loss check draws its tokens until each known mistake's loss lies at least this far
# (relative) from the right one: ten times the float32 rtol, so that no mistake passes by luck.
DISTINCT_LOSS_RTOL = 1e-3
# gpt: lr_at's schedule is computed in Python floats (float64): the same formula written in another order differs by
# a few ulps only.
LR_SCHEDULE = {"atol": 1e-12, "rtol": 1e-9}
# gpt and classifier: the weights after a run of several optimizer steps (08's train_step, 07's epochs of SGD with
# momentum) are compared at this many times the float32 tolerance: the rounding of each step compounds over the run.
TRAINING_RUN_LOOSER = 10.0
# gpt: after clipping, the gradients' total norm sits at the threshold up to this (clip_grad_norm_ scales by
# max_norm / (norm + 1e-6), and the norm is summed in float32).
CLIPPED_NORM_RTOL = 1e-3
# gpt: two known mistakes of sample_next_token draw from the same distribution (so none is told from the other) when
# their probabilities agree up to this.
SAME_DISTRIBUTION = {"atol": 1e-9, "rtol": 1e-5}
# gpt: the frequency tests of sample_next_token. Hidden: a chi-square above this fails (for at most 5 degrees of
# freedom its p-value is below 1e-6). Public: over 4000 draws each token's frequency lies within this of its
# probability (the standard error is at most 0.008: 5 of them).
SAMPLING_CHI2_LIMIT = 40.0
SAMPLING_FREQUENCY_SLACK = 0.04

# translation: a Python float written out by hand in another order (noam_lr's rate, corpus_bleu's score, both
# computed in float64) equals the expected one up to this, relative and absolute (the public checks).
FORMULA_FLOAT64 = 1e-9
# translation: the hidden beam-search check searches its probes for sources on which a known mistake's translation
# ranks apart from the reference's; two ranking scores (float64 log-probability / length penalty, on the CPU) count
# as apart beyond this, relative and absolute, far above float64 noise.
RANKING_APART = {"atol": 1e-4, "rtol": 1e-4}
