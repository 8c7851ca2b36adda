"""pretrained: the known-mistake variants of notebook 11, one module per part (`mistakes_checkpoint`,
`mistakes_cache`, `mistakes_lora`, `mistakes_features`), gathered here: every variant under its own name, and one
`TABLE` {mistake id: (variant, switches)} and one `FORMS` of them all (each part's checks read their own module)."""
from autograder.checks.pretrained import mistakes_cache, mistakes_checkpoint, mistakes_features, mistakes_lora
from autograder.checks.pretrained.mistakes_cache import *  # noqa: F401,F403
from autograder.checks.pretrained.mistakes_checkpoint import *  # noqa: F401,F403
from autograder.checks.pretrained.mistakes_features import *  # noqa: F401,F403
from autograder.checks.pretrained.mistakes_lora import *  # noqa: F401,F403

_PARTS = (mistakes_checkpoint, mistakes_cache, mistakes_lora, mistakes_features)

TABLE = {}
FORMS = {}
for _part in _PARTS:
    if set(_part.TABLE) & set(TABLE):
        raise ValueError(f"{_part.__name__}: mistake ids listed by another part too: {set(_part.TABLE) & set(TABLE)}")
    TABLE.update(_part.TABLE)
    FORMS.update(getattr(_part, "FORMS", {}))
