# Starts viga's bridge, the viga_bridge package beside this file, in a headless Blender:
#   python run_viga_bridge.py -- --mode serve            (bpy module)
#   blender -b --factory-startup -P run_viga_bridge.py -- --mode serve
# The package is loaded from its folder by path: this folder never goes on sys.path, so
# nothing lying beside it can be imported in place of a standard module.
import importlib.util
import os
import sys

package = os.path.join(os.path.dirname(os.path.abspath(__file__)), "viga_bridge")
spec = importlib.util.spec_from_file_location(
    "viga_bridge", os.path.join(package, "__init__.py"), submodule_search_locations=[package],
)
bridge = importlib.util.module_from_spec(spec)
sys.modules["viga_bridge"] = bridge
spec.loader.exec_module(bridge)
bridge.main()
