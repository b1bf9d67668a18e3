"""Turning what people send (voice notes, photos, documents) into what a model reads.

`intake` fetches each attachment through its channel into the context's inbox folder and hands
it to the part that knows its kind: `audio` (transcription backends), `images` (resizing,
whether the model sees images at all), `documents` (text out of PDFs and text files).
`window` decides which images of a conversation are sent as pixels in a model call.
"""
