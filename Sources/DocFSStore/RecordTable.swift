/// The store's records by row, for the in-memory tree.
///
/// Why not `[Int64: Record]`: a dictionary reserves a power-of-two number of buckets and stores
/// the 280-byte record inline in every one of them, used or not. At 100,000 items that was
/// 262,144 buckets, ~75 MB, for ~29 MB of records. Here the records sit in dense slots (a freed
/// slot is reused) and the dictionary maps a row to its slot number only.
struct RecordTable: Sendable, Sequence {
    private var slotOfRow: [Int64: Int32] = [:]
    private var slots: [Record?] = []
    private var freeSlots: [Int32] = []

    var count: Int { slotOfRow.count }
    var keys: Dictionary<Int64, Int32>.Keys { slotOfRow.keys }
    var values: LazyMapSequence<Dictionary<Int64, Int32>.Values, Record> {
        slotOfRow.values.lazy.map { [slots] in slots[Int($0)]! }
    }

    subscript(row: Int64) -> Record? {
        get { slotOfRow[row].flatMap { slots[Int($0)] } }
        _modify {
            if let slot = slotOfRow[row] {
                yield &slots[Int(slot)]
                if slots[Int(slot)] == nil {
                    slotOfRow[row] = nil
                    freeSlots.append(slot)
                }
            } else {
                var added: Record?
                yield &added
                if let added { place(added, at: row) }
            }
        }
    }

    @discardableResult
    mutating func removeValue(forKey row: Int64) -> Record? {
        guard let slot = slotOfRow.removeValue(forKey: row) else { return nil }
        defer { slots[Int(slot)] = nil }
        freeSlots.append(slot)
        return slots[Int(slot)]
    }

    private mutating func place(_ record: Record, at row: Int64) {
        if let slot = freeSlots.popLast() {
            slots[Int(slot)] = record
            slotOfRow[row] = slot
        } else {
            slotOfRow[row] = Int32(slots.count)
            slots.append(record)
        }
    }

    struct Iterator: IteratorProtocol {
        fileprivate var rows: Dictionary<Int64, Int32>.Iterator
        fileprivate let slots: [Record?]
        mutating func next() -> (key: Int64, value: Record)? {
            guard let (row, slot) = rows.next() else { return nil }
            return (row, slots[Int(slot)]!)
        }
    }

    func makeIterator() -> Iterator { Iterator(rows: slotOfRow.makeIterator(), slots: slots) }
}
