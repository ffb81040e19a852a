-- A message that replies to another carries what it quotes, for the prompt.
ALTER TABLE messages ADD COLUMN quoted_sender TEXT NOT NULL DEFAULT '';
ALTER TABLE messages ADD COLUMN quoted_text TEXT NOT NULL DEFAULT '';
