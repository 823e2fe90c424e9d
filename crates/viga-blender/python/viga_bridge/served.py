"""What the bridge knows about the Blender it serves, set by the add-on server and read by
the commands. Read and set as `served.user_scene`, never imported by value: a copy would
not see it change."""

# True while this bridge serves a person's Blender (the extension): its open file is theirs.
user_scene = False
# The add-on's server, queue, poll function and connection file while it serves.
addon = {}
