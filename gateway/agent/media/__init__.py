"""Turning what people send (voice notes, photos, documents) into what a model reads.

`intake` fetches each attachment through its channel into the context's inbox folder and hands
it to the part that knows its kind: `audio` (transcription backends), `images` (resizing,
whether the model sees images at all), `documents` (text out of PDFs and text files).
`window` decides which images of a conversation are sent as pixels in a model call.

The other way, replies read aloud: `speech_text` turns a reply's Markdown into what is said,
`speech` (backends: a local Piper voice, an OpenAI-compatible endpoint) says it, and
`voice_note` encodes it as Ogg Opus with its length and waveform; `openai_audio` is the
OpenAI-compatible endpoint both directions share.
"""
