"""daotai (导演台): turn a director's shot list into video on your own machine."""

__version__ = "0.1.0"
