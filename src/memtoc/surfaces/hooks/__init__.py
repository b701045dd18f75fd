"""memtoc as an agent's hooks: settings installers, the hook runner and the transcript watcher."""
