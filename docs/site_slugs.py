"""The heading anchors of the documentation site, as GitHub makes them (``make docs`` puts this folder on the path):
lower case, every character but letters, digits, spaces, hyphens and underscores dropped, each space a hyphen (so
``nu = 1e-4`` becomes ``nu--1e-4``), so that a link written for the repository's pages works on the site."""

import re
import unicodedata


def github_slug(value: str, separator: str = "-") -> str:
    text = unicodedata.normalize("NFKD", value).lower().strip()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", separator)
