"""One module per implementation family. Each registers its candidates with
``audit.candidates.candidate`` beside the function that calls the real library."""
