"""Attacks nothing: the task's own kernel behind the preamble's wrapper, a second untouched copy.
Its sessions beside the untouched copy's, in the same call, are the noise an attack's must
clear before the suite's GAINED means anything (two sessions of two pairs each can sit within
0.001 of each other by chance, and a 1% "gain" then reads as GAINED).
Expected: within noise or gains nothing."""
install(lambda f: f)
