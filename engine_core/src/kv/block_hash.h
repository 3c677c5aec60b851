// The prefix cache's block hashes, shared with the API servers
// (sightline/ipc/block_hash.h), under the engine's names.
#pragma once

#include "sightline/ipc/block_hash.h"

namespace sightline::engine {

using ipc::BlockHash;
using ipc::BlockHashHasher;
using ipc::ExtendBlockHashes;
using ipc::HashBlockTokens;

}  // namespace sightline::engine
