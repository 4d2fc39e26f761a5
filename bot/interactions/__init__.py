"""What a click, a form or a command does, on every platform: the adapters parse their
payload into a small typed value, call one handler here, and lend their transport (a
Protocol of a few methods); the handler decides and talks to :class:`bot.service.ChatService`.

* :mod:`bot.interactions.help_replies` - a help request's buttons and form, and the post-resume step;
* :mod:`bot.interactions.votes` - 👍 / 👎, the 👎 reason and "Ask the experts";
* :mod:`bot.interactions.commands` - ``/threadwise <words>``;
* :mod:`bot.interactions.outsiders` - the one refusal of a message from outside the organisation.
"""
