"""Leaf helpers every chat platform shares: each rule written once, importing nothing from
the service, the interactions or the platforms.

* :mod:`bot.chat.text` - the one escaping rule for text we show (user, document and model
  text is data; :class:`~bot.chat.text.Mention` parts are the only mentions);
* :mod:`bot.chat.syntax` - how a message is read before it is a question: "no words"
  (``has_words``), the help-request reply syntax (``REPLY_SYNTAX``, ``parse_human_reply``)
  and ``remember:``;
* :mod:`bot.chat.split` - the code-fence-aware splitter of long text into posts
  (parametrised by limit, size function, fence syntax, protected spans);
* :mod:`bot.chat.sources` - what follows an answer: numbered sources and the route note;
* :mod:`bot.chat.policy` - whom the bot answers: reply policy and follow-ups only in
  conversations the bot takes part in (``decline_reason``), bots and the bot itself,
  outsiders; who may answer help requests (experts and admins) and what others are told;
* :mod:`bot.chat.help` - a help request's words, its expiry, the note after a resume;
* :mod:`bot.chat.vote_controls` - the 👍 / 👎 controls' words and the answer id they carry;
* :mod:`bot.chat.reactions` - the status reaction state machine: one bot reaction on a
  question at a time, ending in exactly one of done / apology / waiting;
* :mod:`bot.chat.tasks` - the adapters' background task registry (spawn, wait, shut down);
* :mod:`bot.chat.threads` - the thread-key scheme of every platform (build and parse);
* :mod:`bot.chat.channels` - per-channel settings (``[[channels]]``) as every platform applies them.

What a click, a form or a command *does* is :mod:`bot.interactions`.
"""
