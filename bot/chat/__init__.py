"""What the Slack and Discord adapters share (the chat layer).

* :mod:`bot.chat.text` - the one escaping rule for text we show: text from users,
  documents and models is data (escaped by the platform's renderer); mentions we mean
  are :class:`~bot.chat.text.Mention` parts, built as mentions only after escaping;
  which link targets may become links; the help-request reply syntax.
* :mod:`bot.chat.policy` - whether a message is for the bot (``reply_policy``) and
  whether its author is an outsider (Slack Connect teams, Discord guilds).
* :mod:`bot.chat.reactions` - the status reaction state machine: one bot reaction on a
  question at a time, ending in exactly one of done / apology / waiting.
"""
