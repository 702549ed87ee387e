"""What the neural backends share, in four parts.

- :mod:`.request` — the model's defaults (catalog family, model row, user options) and the
  native request a shot becomes (size, frames at the model's own rate, fitted prompt);
- :mod:`.retime` — native output back onto the plan's frame grid (resize, repeat/drop);
- :mod:`.stepping` — a denoise loop in a worker thread bridged to events, one retry a memory
  tier lower on out-of-memory;
- :mod:`.runner` — a diffusers pipeline loaded (through a replaceable build hook), placed by
  the memory planner, kept warm between shots, and the per-shot flow every diffusers backend
  shares.

``request`` and ``retime`` import neither torch nor diffusers: the MLX backend uses them too.
"""
