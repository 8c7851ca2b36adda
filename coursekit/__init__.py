"""Student-side helpers of the Transformer course: environment, text, data, loaders, plots, public checks."""
