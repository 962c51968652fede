from lineup.cli import entry

entry()
