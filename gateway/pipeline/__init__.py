"""The message path: intake, access and pairing, routing, lanes, commands, the turn, delivery."""
