"""The checking framework of the hidden checks, readable on its own: what every topic folder's checks are made of.

- `remote.py`          the grader's side of the kernel protocol: `RemoteObject`, the channel to the kernel, strict
                       decoding, the `@hidden_check` decorator every check wears (local objects handed in, criteria applied).
- `toolkit.py`         set-up (`start_check`, seeded draws of tensors), calling student code, `fail(..., mistake=id)`.
- `compare.py`         weights copied by contract names, tensors compared at the course's tolerance, known mistakes
                       tried on a mismatch (`diagnose`, a topic's table through `from_table`), dropout, max_len.
- `tolerance.py`       the grading device and the tolerance for it (the numbers: `coursekit/tolerance.py`).
- `draws.py`           per-submission draws: seeds, sizes and texts drawn from this submission's salt.
- `inputs.py`          inputs several topics share: `reference(topic)`, padded id batches, lengths, reference modules.
- `criteria.py`        partial credit by criterion: stated edge cases and arguments cost their share, not the whole.
- `parts.py`           follow-through credit: a composite is judged given working parts (the parts graph's use).
- `trained_weights.py` a trained model's weights taken out of the kernel and judged in the reference architecture.

The kit imports no topic folder; the topic folders (`autograder/checks/<topic>/`) import the kit.
"""
