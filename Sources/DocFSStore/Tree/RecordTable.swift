/// The store's cached records by row (the working set of `TreeState`), with a CLOCK
/// (second-chance) order for eviction.
///
/// Why not `[Int64: Record]`: a dictionary reserves a power-of-two number of buckets and stores
/// the 280-byte record inline in every one of them, used or not. At 100,000 items that was
/// 262,144 buckets, ~75 MB, for ~29 MB of records. Here the records sit in dense slots (a freed
/// slot is reused) and the dictionary maps a row to its slot number only. Each slot has a
/// "referenced" bit that `lookup` sets and the eviction hand clears: a record read since the hand
/// last passed it gets a second chance, so the records in use stay and the rest go first.
struct RecordTable: Sendable, Sequence {
    private var slotOfRow: [Int64: Int32] = [:]
    private var slots: [Record?] = []
    private var referenced: [Bool] = []
    private var freeSlots: [Int32] = []
    private var hand = 0

    var count: Int { slotOfRow.count }
    var keys: Dictionary<Int64, Int32>.Keys { slotOfRow.keys }
    var values: LazyMapSequence<Dictionary<Int64, Int32>.Values, Record> {
        slotOfRow.values.lazy.map { [slots] in slots[Int($0)]! }
    }

    func contains(_ row: Int64) -> Bool { slotOfRow[row] != nil }

    /// The record, marked as used (it survives the next pass of the eviction hand).
    mutating func lookup(_ row: Int64) -> Record? {
        guard let slot = slotOfRow[row] else { return nil }
        referenced[Int(slot)] = true
        return slots[Int(slot)]
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
            referenced[Int(slot)] = true
            slotOfRow[row] = slot
        } else {
            slotOfRow[row] = Int32(slots.count)
            slots.append(record)
            referenced.append(true)
        }
    }

    /// Evicts records the hand finds unreferenced (clearing the bit of referenced ones as it
    /// passes) until at most `target` remain, skipping rows `keep` names. Returns how many went.
    @discardableResult
    mutating func evict(downTo target: Int, keep: (Int64) -> Bool) -> Int {
        var evicted = 0
        var steps = 0
        let total = slots.count
        guard total > 0 else { return 0 }
        // Two full turns at most: the first clears every bit, the second evicts.
        while slotOfRow.count > target, steps < 2 * total {
            if hand >= total { hand = 0 }
            if let record = slots[hand] {
                if referenced[hand] {
                    referenced[hand] = false
                } else if !keep(record.row) {
                    slotOfRow[record.row] = nil
                    slots[hand] = nil
                    freeSlots.append(Int32(hand))
                    evicted += 1
                }
            }
            hand += 1
            steps += 1
        }
        return evicted
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
