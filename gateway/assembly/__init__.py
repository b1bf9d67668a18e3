"""Building a running gateway from settings: channels, provider stack, services."""
