"""The Slack adapter (slack-bolt): one module per concern, :mod:`bot.platforms.slack.app` first."""
