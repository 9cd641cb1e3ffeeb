import DocFSProvider

// Changes a provider makes on its own (Provider.observeChanges): the kernel forgets what it
// cached for them, and a replaced identifier keeps its inode.
extension Bridge {
    func observeProviderChanges() {
        provider.observeChanges { [weak self] changes in self?.apply(changes) }
    }

    func apply(_ changes: [ProviderChange]) {
        for change in changes {
            switch change {
            case .modified(let identifier):
                if let node = inodes.knownNode(identifier) { notifier.invalidateContents(ino: node.ino) }
            case .nameChanged(let parent, let name):
                guard let folder = inodes.knownNode(parent) else { continue }
                notifier.invalidateEntry(parent: folder.ino, name: name)
                notifier.invalidateContents(ino: folder.ino)
            case .identifierReplaced(let old, let new):
                inodes.replaceIdentifier(old, with: new)
            }
        }
    }
}
