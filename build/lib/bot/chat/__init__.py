"""What every chat platform shares (the chat layer): each behaviour written once.

The adapters in :mod:`bot.platforms` (Slack, Discord, the console) only translate
transport: events in, posts out. Everything they have in common lives here:

* :mod:`bot.chat.text` - the one escaping rule for text we show (user, document and model
  text is data; :class:`~bot.chat.text.Mention` parts are the only mentions), and the
  help-request reply syntax: shown (``REPLY_SYNTAX``) and parsed (``parse_human_reply``);
* :mod:`bot.chat.split` - the code-fence-aware splitter of long text into posts
  (parametrised by limit, size function, fence syntax, protected spans);
* :mod:`bot.chat.sources` - what follows an answer: numbered sources and the route note;
* :mod:`bot.chat.policy` - whom the bot answers: reply policy and follow-ups only in
  conversations the bot takes part in (``decline_reason``), bots and the bot itself,
  outsiders (and their one refusal); who may answer help requests (experts and admins) and
  what others are told (naming the experts);
* :mod:`bot.chat.help` - a help request's words, its expiry, a click on its buttons or form
  (``on_help_click`` with a typed ``HelpClick``: refuse, open the form, or resume), and the
  post-resume step (resume once, then the handled note on the help request);
* :mod:`bot.chat.reactions` - the status reaction state machine: one bot reaction on a
  question at a time, ending in exactly one of done / apology / waiting;
* :mod:`bot.chat.tasks` - the adapters' background task registry (spawn, wait, shut down);
* :mod:`bot.chat.feedback` - the 👍 / 👎 controls' words, and the handling of a vote, its
  reason and "Ask the experts" (adapters parse a click into a typed value and lend their
  transport: ``on_vote`` / ``on_reason`` / ``on_escalate``);
* :mod:`bot.chat.commands` - ``/threadwise <words>``: outsiders refused, which admin command runs;
* :mod:`bot.chat.threads` - the thread-key scheme of every platform (build and parse);
* :mod:`bot.chat.channels` - per-channel settings (``[[channels]]``) as every platform applies them.
"""
