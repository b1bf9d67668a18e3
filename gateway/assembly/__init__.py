"""Building a running gateway from settings (channels, provider stack, services), the instance
lock it takes first, and backup/restore/clone of its files: the app layer, above the rest."""
