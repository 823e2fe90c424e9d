mod addon_discovery;
mod addons;
mod assets;
mod camera;
mod montage;
mod registry;
mod tools;
