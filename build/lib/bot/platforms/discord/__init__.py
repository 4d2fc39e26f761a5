"""The Discord adapter (discord.py): one module per concern, :mod:`bot.platforms.discord.app` first."""
