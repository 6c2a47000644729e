"""The Inductor config the case ran under, set line by line."""

import torch
import torch._inductor.config


def apply_inductor_config(source: str) -> list[str]:
    """Run the config lines one by one, and return the keys this torch lacks, skipped: a repro
    written on another torch may set a key that this one renamed or dropped, and the
    AttributeError would end the run with exit 1, the code that means REPRODUCED."""
    skipped = []
    for line in source.strip().splitlines():
        name = line.split("=", 1)[0].strip().removeprefix("torch._inductor.config.")
        owner: object = torch._inductor.config
        for part in name.split("."):
            if not hasattr(owner, part):
                skipped.append(name)
                break
            owner = getattr(owner, part)
        else:
            exec(line, globals())
    return skipped
