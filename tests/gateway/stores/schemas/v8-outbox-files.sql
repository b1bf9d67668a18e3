-- The state database as a fresh install at 650f31f created it, with a few rows.
-- Written by tests/gateway/stores/schemas/from_history.py; do not edit.
CREATE TABLE inbox (
    channel TEXT NOT NULL, chat_id TEXT NOT NULL, message_id TEXT NOT NULL,
    payload TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'pending',
    received_at TEXT NOT NULL, done_at TEXT, retries INTEGER NOT NULL DEFAULT 0,
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
CREATE TABLE welcomes (
    channel TEXT NOT NULL, sender_id TEXT NOT NULL, chat_id TEXT NOT NULL,
    person_id TEXT NOT NULL, as_owner INTEGER NOT NULL, approved_at TEXT NOT NULL,
    done_at TEXT, PRIMARY KEY (channel, sender_id)
);
CREATE TABLE links (
    channel TEXT NOT NULL, sender_id TEXT NOT NULL, person_id TEXT NOT NULL,
    linked_at TEXT NOT NULL, PRIMARY KEY (channel, sender_id)
);
CREATE TABLE last_dm_route (
    person_id TEXT PRIMARY KEY, channel TEXT NOT NULL, chat_id TEXT NOT NULL,
    sender_id TEXT NOT NULL, at TEXT NOT NULL
);
CREATE TABLE outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT UNIQUE, channel TEXT NOT NULL,
    chat_id TEXT NOT NULL, text TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'pending',
    attempts INTEGER NOT NULL DEFAULT 0, error TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL, finished_at TEXT,
    done_channel TEXT, done_chat TEXT, done_message TEXT, done_status TEXT,
    parts_sent INTEGER NOT NULL DEFAULT 0,
    file TEXT NOT NULL DEFAULT ''
, replaces TEXT NOT NULL DEFAULT '');
CREATE INDEX outbox_pending ON outbox (status, id);
CREATE TABLE previews (
    key TEXT PRIMARY KEY, channel TEXT NOT NULL, chat_id TEXT NOT NULL,
    message_id TEXT NOT NULL, at TEXT NOT NULL
);
CREATE TRIGGER outbox_marks_done AFTER INSERT ON outbox
WHEN NEW.done_message IS NOT NULL BEGIN
    UPDATE inbox SET status = NEW.done_status, done_at = NEW.created_at,
        payload = CASE WHEN NEW.done_status = 'waiting' THEN payload
                  ELSE json_object('chat_type', json_extract(payload, '$.chat_type')) END
    WHERE channel = NEW.done_channel AND chat_id = NEW.done_chat
    AND message_id = NEW.done_message;
    -- The body is needed only while the message may still be answered (`waiting`: the
    -- sender holds a pairing code and may be approved).
    DELETE FROM inbox_body WHERE channel = NEW.done_channel AND chat_id = NEW.done_chat
    AND message_id = NEW.done_message AND NEW.done_status != 'waiting';
END;
CREATE TABLE usage_daily ( person TEXT NOT NULL, day TEXT NOT NULL, kind TEXT NOT NULL, model TEXT NOT NULL, calls INTEGER NOT NULL DEFAULT 0, input INTEGER NOT NULL DEFAULT 0, output INTEGER NOT NULL DEFAULT 0, cache_read INTEGER NOT NULL DEFAULT 0, cache_write INTEGER NOT NULL DEFAULT 0, cost REAL NOT NULL DEFAULT 0, PRIMARY KEY (person, day, kind, model));
INSERT INTO inbox (channel, chat_id, message_id, payload, status, received_at) VALUES ('telegram', '42', '7', '{"channel": "telegram", "chat_id": "42", "sender_id": "55", "text": "still there?", "chat_type": "direct", "message_id": "7", "sender_name": "Ana", "received_at": "2026-11-29T10:00:00+00:00"}', 'pending', '2026-11-29T10:00:00+00:00');
INSERT INTO inbox (channel, chat_id, message_id, payload, status, received_at, done_at) VALUES ('telegram', '42', '6', '{"chat_type": "direct"}', 'done', '2026-11-29T10:00:00+00:00', '2026-11-29T10:00:00+00:00');
INSERT INTO inbox_body VALUES ('telegram', '42', '7', '{"channel": "telegram", "chat_id": "42", "sender_id": "55", "text": "still there?", "chat_type": "direct", "message_id": "7", "sender_name": "Ana", "received_at": "2026-11-29T10:00:00+00:00"}');
INSERT INTO offsets VALUES ('telegram', 1001);
INSERT INTO approved VALUES ('telegram', '55', '2026-11-29T10:00:00+00:00', 'pairing:ABCD2345');
INSERT INTO pairing (channel, code, sender_id, chat_id, sender_name, created_at, expires_at) VALUES ('telegram', 'WXYZ2345', '66', '66', 'Ben', 1796000000.0, 1796003600.0);
INSERT INTO approve_failures VALUES ('telegram', 1796000000.0);
INSERT INTO welcomes (channel, sender_id, chat_id, person_id, as_owner, approved_at) VALUES ('telegram', '66', '66', 'telegram-66', 0, '2026-11-29T10:00:00+00:00');
INSERT INTO links VALUES ('discord', '77', 'ana', '2026-11-29T10:00:00+00:00');
INSERT INTO last_dm_route VALUES ('ana', 'telegram', '42', '55', '2026-11-29T10:00:00+00:00');
INSERT INTO outbox (key, channel, chat_id, text, created_at) VALUES ('reply:telegram:42:7', 'telegram', '42', 'yes, here', '2026-11-29T10:00:00+00:00');
INSERT INTO previews VALUES ('reply:telegram:42:7', 'telegram', '42', '900', '2026-11-29T10:00:00+00:00');
INSERT INTO usage_daily VALUES ('ana', '2026-11-29', 'turn', 'm', 3, 300, 30, 0, 0, 0.25);
