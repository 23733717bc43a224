/* backend_select.h — choose and create the backend a recipe asks for. */
#ifndef MT_BACKEND_SELECT_H
#define MT_BACKEND_SELECT_H

#include <stddef.h>

#include "core/backend.h"
#include "core/recipe/recipe.h"

/* training.backend cpu | cuda | auto, for the rank that is local rank `local_rank` of the
 * `local_size` ranks on its node (torchrun's LOCAL_RANK / LOCAL_WORLD_SIZE; 0 and 1 for one
 * process). One GPU per local rank: the CUDA backend is created on device local_rank (as
 * CUDA_VISIBLE_DEVICES numbers them). A node with fewer visible GPUs than local ranks is, for
 * cuda, an error (MT_ERR_CUDA) on every rank of the node naming the local rank, the local size
 * and the device count, and for auto the CPU backend on every rank (with a note) — never two
 * ranks on one GPU, never a mix of GPU and CPU ranks. auto picks CUDA when a GPU is present and
 * the CUDA backend has every op the model needs, else the CPU backend. CPU threads =
 * training.threads or cores / local_size.
 * `note` receives a line to print when auto fell back to the CPU ("" otherwise). */
mt_status mt_backend_select(const mt_recipe *r, int local_rank, int local_size, mt_backend *be, char *note,
                            size_t note_bytes);

#endif
