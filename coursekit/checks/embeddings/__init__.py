"""embeddings: the public checks of this topic."""
from coursekit.checks.embeddings.checks import check_build_vocab  # noqa: F401
from coursekit.checks.embeddings.checks import check_encode  # noqa: F401
from coursekit.checks.embeddings.checks import check_pad_batch  # noqa: F401
from coursekit.checks.embeddings.checks import check_token_embedding  # noqa: F401
from coursekit.checks.embeddings.checks import check_embedding_matrix_from_word2vec  # noqa: F401
from coursekit.checks.embeddings.checks import check_attention_over_words  # noqa: F401
