"""One turn of a conversation: the bot's steps (recall, prompt, reply, trace), the prompt's
parts and their budget, replies cleaned and checked, and ending a conversation."""
