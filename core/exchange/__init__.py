"""Exchange: what comes into lineup from files and what goes out to them.

Owns reading logs into one record shape (`logs`, `language`), sampling sets
from them (`sampling`), exports (`export`), imports and merges (`importing`)
and blind vote packages (`share`). Every byte it reads is untrusted. May
import: `core.ground`, `core.stats`, `core.answering`, `store`."""
