-- The state database as a fresh install at 61c9692 created it, with a few rows.
-- Written by tests/gateway/stores/schemas/from_history.py; do not edit.
CREATE TABLE inbox (
    channel TEXT NOT NULL, chat_id TEXT NOT NULL, message_id TEXT NOT NULL,
    payload TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'pending',
    received_at TEXT NOT NULL, done_at TEXT,
    PRIMARY KEY (channel, chat_id, message_id)
);
CREATE INDEX inbox_pending ON inbox (status, received_at);
CREATE TABLE inbox_body (
    channel TEXT NOT NULL, chat_id TEXT NOT NULL, message_id TEXT NOT NULL,
    payload TEXT NOT NULL, PRIMARY KEY (channel, chat_id, message_id)
);
CREATE TABLE offsets (channel TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE approved (
    channel TEXT NOT NULL, sender_id TEXT NOT NULL, approved_at TEXT NOT NULL, via TEXT NOT NULL,
    PRIMARY KEY (channel, sender_id)
);
CREATE TABLE pairing (
    channel TEXT NOT NULL, code TEXT NOT NULL, sender_id TEXT NOT NULL, chat_id TEXT NOT NULL,
    sender_name TEXT NOT NULL, created_at REAL NOT NULL, expires_at REAL NOT NULL,
    resent INTEGER NOT NULL DEFAULT 0, status TEXT NOT NULL DEFAULT 'pending',
    PRIMARY KEY (channel, code)
);
CREATE INDEX pairing_sender ON pairing (channel, sender_id);
CREATE TABLE approve_failures (channel TEXT NOT NULL, at REAL NOT NULL);
CREATE TABLE links (
    channel TEXT NOT NULL, sender_id TEXT NOT NULL, person_id TEXT NOT NULL,
    linked_at TEXT NOT NULL, PRIMARY KEY (channel, sender_id)
);
CREATE TABLE last_dm_route (
    person_id TEXT PRIMARY KEY, channel TEXT NOT NULL, chat_id TEXT NOT NULL,
    sender_id TEXT NOT NULL, at TEXT NOT NULL
);
CREATE TABLE deliveries (
    id INTEGER PRIMARY KEY AUTOINCREMENT, channel TEXT NOT NULL, chat_id TEXT NOT NULL,
    ok INTEGER NOT NULL, error TEXT NOT NULL DEFAULT '', at TEXT NOT NULL
);
INSERT INTO inbox (channel, chat_id, message_id, payload, status, received_at) VALUES ('telegram', '42', '7', '{"channel": "telegram", "chat_id": "42", "sender_id": "55", "text": "still there?", "chat_type": "direct", "message_id": "7", "sender_name": "Ana", "received_at": "2026-11-29T10:00:00+00:00"}', 'pending', '2026-11-29T10:00:00+00:00');
INSERT INTO inbox (channel, chat_id, message_id, payload, status, received_at, done_at) VALUES ('telegram', '42', '6', '{"chat_type": "direct"}', 'done', '2026-11-29T10:00:00+00:00', '2026-11-29T10:00:00+00:00');
INSERT INTO inbox_body VALUES ('telegram', '42', '7', '{"channel": "telegram", "chat_id": "42", "sender_id": "55", "text": "still there?", "chat_type": "direct", "message_id": "7", "sender_name": "Ana", "received_at": "2026-11-29T10:00:00+00:00"}');
INSERT INTO offsets VALUES ('telegram', 1001);
INSERT INTO approved VALUES ('telegram', '55', '2026-11-29T10:00:00+00:00', 'pairing:ABCD2345');
INSERT INTO pairing (channel, code, sender_id, chat_id, sender_name, created_at, expires_at) VALUES ('telegram', 'WXYZ2345', '66', '66', 'Ben', 1796000000.0, 1796003600.0);
INSERT INTO approve_failures VALUES ('telegram', 1796000000.0);
INSERT INTO links VALUES ('discord', '77', 'ana', '2026-11-29T10:00:00+00:00');
INSERT INTO last_dm_route VALUES ('ana', 'telegram', '42', '55', '2026-11-29T10:00:00+00:00');
INSERT INTO deliveries (channel, chat_id, ok, at) VALUES ('telegram', '42', 1, '2026-11-29T10:00:00+00:00');
